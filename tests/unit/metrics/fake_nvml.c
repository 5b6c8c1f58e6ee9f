/* tests/unit/metrics/fake_nvml.c — a stand-in for libnvidia-ml.so.1 with
 * fixed values, so the NVML path of metrics/nvml.c (dlopen, symbols,
 * sampling, the text) runs on CPU-only CI: nvml_test loads it directly and
 * the e2e suite through PTSERVE_NVML_LIBRARY. FAKE_NVML_GPUS=<n> sets how
 * many GPUs it reports (default 2); FAKE_NVML_INIT_FAILS=1 fails nvmlInit.
 * It has no nvmlDeviceGetEnforcedPowerLimit, like a board without that
 * sensor: that gauge must be left out, not faked. */
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

typedef int nvmlReturn_t;
typedef void *nvmlDevice_t;
typedef struct {
  unsigned int gpu, memory;
} nvmlUtilization_t;
typedef struct {
  unsigned long long total, free, used;
} nvmlMemory_t;

static long gpus(void) {
  const char *v = getenv("FAKE_NVML_GPUS");
  return v ? strtol(v, NULL, 10) : 2;
}

/* Devices are the indexes 1.. as pointers. */
static long index_of(nvmlDevice_t d) { return (long)(size_t)d - 1; }

nvmlReturn_t nvmlInit_v2(void) {
  const char *v = getenv("FAKE_NVML_INIT_FAILS");
  return v && *v == '1' ? 9 /* NVML_ERROR_DRIVER_NOT_LOADED */ : 0;
}
nvmlReturn_t nvmlShutdown(void) { return 0; }
const char *nvmlErrorString(nvmlReturn_t r) {
  return r == 9 ? "Driver Not Loaded" : "Unknown Error";
}
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *n) {
  *n = (unsigned int)gpus();
  return 0;
}
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *d) {
  if (i >= (unsigned int)gpus()) return 2; /* NVML_ERROR_INVALID_ARGUMENT */
  *d = (nvmlDevice_t)(size_t)(i + 1);
  return 0;
}
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *out, unsigned int len) {
  snprintf(out, len, "GPU-fake-%ld", index_of(d));
  return 0;
}
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *out, unsigned int len) {
  snprintf(out, len, "Fake GPU %ld", index_of(d));
  return 0;
}
nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *u) {
  u->gpu = index_of(d) == 0 ? 37 : 100;
  u->memory = 5;
  return 0;
}
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m) {
  m->total = 80ull << 30;
  m->used = (unsigned long long)(index_of(d) + 1) << 30;
  m->free = m->total - m->used;
  return 0;
}
nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned int *mw) {
  *mw = 71500u + 1000u * (unsigned int)index_of(d);
  return 0;
}
/* 1 J more at every call: energy since the server started grows. */
nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t d, unsigned long long *mj) {
  static unsigned long long calls[64];
  long i = index_of(d);
  *mj = 1000000ull + 1000ull * calls[i]++;
  return 0;
}
