/* backends/pytorch/intra.c — see intra.h. */
#include "backends/pytorch/intra.h"

#include <sched.h>
#include <unistd.h>

int pts_intra_cores(void) {
#ifdef CPU_COUNT /* glibc's sched_getaffinity (needs _GNU_SOURCE) */
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
#endif
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int)n : 1;
}

int pts_intra_choose(int configured, int cores, int instances, int libtorch_default,
                     struct pts_intra_choice *out) {
  if (cores < 1) cores = 1;
  if (instances < 1) instances = 1;
  if (libtorch_default < 1) libtorch_default = cores;
  int n = configured;
  if (n <= 0) {
    n = cores / instances;
    if (n > libtorch_default) n = libtorch_default;
    if (n < 1) n = 1;
  }
  *out = (struct pts_intra_choice){.threads = n,
                                   .configured = configured > 0 ? configured : 0,
                                   .cores = cores,
                                   .instances = instances,
                                   .libtorch_default = libtorch_default};
  return n;
}
