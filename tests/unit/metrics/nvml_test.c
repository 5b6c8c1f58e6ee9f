/* tests/unit/metrics/nvml_test.c — metrics/nvml.c against the fake NVML
 * library (fake_nvml.c, path in PTS_FAKE_NVML): values as the fake defines
 * them, by hand; and the three ways of having no GPU metrics (no library,
 * nvmlInit failing, no GPU), each with a reason. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "metrics/nvml.h"

static void samples_from_the_fake(void **state) {
  (void)state;
  setenv("PTSERVE_NVML_LIBRARY", PTS_FAKE_NVML, 1);
  unsetenv("FAKE_NVML_GPUS");
  unsetenv("FAKE_NVML_INIT_FAILS");
  char why[256] = "";
  struct pts_nvml *n = pts_nvml_open(why, sizeof why);
  assert_non_null(n);
  struct pts_gpu_sample g[4];
  assert_int_equal(pts_nvml_sample(n, g, 4), 2);
  assert_string_equal(g[0].uuid, "GPU-fake-0");
  assert_string_equal(g[1].uuid, "GPU-fake-1");
  assert_true(g[0].has_utilization);
  assert_true(g[0].utilization == 0.37);
  assert_true(g[1].utilization == 1.0);
  assert_true(g[1].has_memory);
  assert_true(g[1].memory_total_bytes == 80ull << 30);
  assert_true(g[1].memory_used_bytes == 2ull << 30);
  assert_true(g[0].has_power && g[0].power_watts == 71.5);
  assert_false(g[0].has_power_limit); /* the fake has no such function */
  /* open read the counter once (1000000 mJ), this sample once more (+1 J) */
  assert_true(g[0].has_energy && g[0].energy_joules == 1.0);
  /* a smaller array gets the first GPUs only */
  assert_int_equal(pts_nvml_sample(n, g, 1), 1);
  pts_nvml_close(n);
}

static void no_gpu_metrics_and_why(void **state) {
  (void)state;
  char why[256] = "";
  setenv("PTSERVE_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1);
  assert_null(pts_nvml_open(why, sizeof why));
  assert_non_null(strstr(why, "NVML is not available"));
  assert_non_null(strstr(why, "/nonexistent/libnvidia-ml.so.1"));

  setenv("PTSERVE_NVML_LIBRARY", PTS_FAKE_NVML, 1);
  setenv("FAKE_NVML_INIT_FAILS", "1", 1);
  assert_null(pts_nvml_open(why, sizeof why));
  assert_string_equal(why, "NVML failed to initialise (Driver Not Loaded)");
  unsetenv("FAKE_NVML_INIT_FAILS");

  setenv("FAKE_NVML_GPUS", "0", 1);
  assert_null(pts_nvml_open(why, sizeof why));
  assert_string_equal(why, "NVML found no GPU on this host");
  unsetenv("FAKE_NVML_GPUS");
  pts_nvml_close(NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(samples_from_the_fake),
      cmocka_unit_test(no_gpu_metrics_and_why),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
