/* trace/nvtx.c — see nvtx.h. The NVTX part is compiled only with
 * PTS_WITH_NVTX (a CUDA build); it can not be compiled on hosts without the
 * CUDA toolkit, so it is kept to the few calls below. */
#include "trace/nvtx.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef PTS_WITH_NVTX
#include <nvtx3/nvToolsExt.h>

static bool enabled;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void read_env(void) {
  const char *v = getenv("PTSERVE_NVTX");
  enabled = v && (strcmp(v, "1") == 0 || strcmp(v, "true") == 0 || strcmp(v, "on") == 0);
}

bool pts_nvtx_enabled(void) {
  pthread_once(&once, read_env);
  return enabled;
}

uint64_t pts_nvtx_request_begin(const char *model, uint64_t seq) {
  if (!pts_nvtx_enabled()) return 0;
  char name[160];
  snprintf(name, sizeof name, "%s request %llu", model, (unsigned long long)seq);
  /* 0 when no tool is attached: then there is nothing to end either. */
  return (uint64_t)nvtxRangeStartA(name);
}

void pts_nvtx_request_end(uint64_t range) {
  if (range) nvtxRangeEnd((nvtxRangeId_t)range);
}

void pts_nvtx_batch_push(const char *model, size_t n_requests, int64_t batch_size) {
  if (!pts_nvtx_enabled()) return;
  char name[160];
  snprintf(name, sizeof name, "%s batch of %zu (size %lld)", model, n_requests,
           (long long)batch_size);
  nvtxRangePushA(name);
}

void pts_nvtx_batch_pop(void) {
  if (pts_nvtx_enabled()) nvtxRangePop();
}

#else /* no NVTX in this build */

bool pts_nvtx_enabled(void) { return false; }

uint64_t pts_nvtx_request_begin(const char *model, uint64_t seq) {
  (void)model;
  (void)seq;
  return 0;
}

void pts_nvtx_request_end(uint64_t range) { (void)range; }

void pts_nvtx_batch_push(const char *model, size_t n_requests, int64_t batch_size) {
  (void)model;
  (void)n_requests;
  (void)batch_size;
}

void pts_nvtx_batch_pop(void) {}

#endif
