/* bench/cpu/inproc.c — the model's own time, without a server.
 *
 *   bench_inproc --model PATH.pt --input FP32:1,16 [--input ...] [--seconds 2]
 *                [--warmup 500] [--label NAME] [--csv FILE] [--threads N]
 *
 * Loads a TorchScript file (or an AOTInductor package, PATH.pt2, whose
 * inputs are given in its flat order) through the same bridge ptserve's pytorch backend
 * uses (backends/pytorch/torch_bridge.h) with the backend's default run
 * options (inference mode, optimized execution, LibTorch's default intra-op
 * threads), then calls forward() back to back on one thread, on random
 * inputs, for a fixed time. What it prints is what a request would cost if
 * the server added nothing: the server's own overhead per request is the
 * served latency minus this.
 *
 * Threading: one thread.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backends/pytorch/torch_bridge.h"
#include "core/alloc.h"
#include "ptperf/lib/window.h"

#define MAX_INPUTS 8
#define MAX_DIMS 8

struct input_arg {
  enum pts_dtype dtype;
  int ndim;
  int64_t dims[MAX_DIMS];
  size_t byte_size;
  void *data;
};

static uint64_t clock_ns(clockid_t clock) {
  struct timespec ts;
  clock_gettime(clock, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}
static uint64_t now_ns(void) { return clock_ns(CLOCK_MONOTONIC); }

/* "FP32:1,16" → dtype and dims; BYTES is not a tensor the bridge takes here. */
static bool parse_input(const char *arg, struct input_arg *in) {
  const char *colon = strchr(arg, ':');
  if (!colon) return false;
  char dt[16];
  size_t n = (size_t)(colon - arg);
  if (n == 0 || n >= sizeof dt) return false;
  memcpy(dt, arg, n);
  dt[n] = '\0';
  in->dtype = pts_dtype_from_name(dt);
  if (pts_dtype_size(in->dtype) == 0) return false;
  in->ndim = 0;
  size_t elems = 1;
  for (const char *p = colon + 1; *p;) {
    char *end;
    errno = 0;
    long d = strtol(p, &end, 10);
    if (end == p || errno || d < 0 || d > (1 << 24) || in->ndim == MAX_DIMS ||
        (*end != ',' && *end != '\0'))
      return false;
    in->dims[in->ndim++] = d;
    elems *= (size_t)d;
    p = *end ? end + 1 : end;
  }
  in->byte_size = elems * pts_dtype_size(in->dtype);
  return in->ndim > 0;
}

/* [0, 1) for floats, 0..99 for integers: the same ranges ptperf sends. */
static void fill_random(struct input_arg *in, unsigned *seed) {
  size_t esz = pts_dtype_size(in->dtype), n = in->byte_size / esz;
  unsigned char *p = in->data;
  for (size_t i = 0; i < n; i++, p += esz) {
    int r = rand_r(seed);
    if (in->dtype == PTS_DTYPE_FP32) {
      float f = (float)r / ((float)RAND_MAX + 1.0f);
      memcpy(p, &f, 4);
    } else if (in->dtype == PTS_DTYPE_FP64) {
      double d = (double)r / ((double)RAND_MAX + 1.0);
      memcpy(p, &d, 8);
    } else if (in->dtype == PTS_DTYPE_BOOL) {
      p[0] = (unsigned char)(r & 1);
    } else {
      memset(p, 0, esz);
      p[0] = (unsigned char)(r % 100);
    }
  }
}

static int usage(void) {
  fputs(
      "usage: bench_inproc --model PATH.pt --input DTYPE:d1,d2 [--input ...]\n"
      "                    [--seconds S] [--warmup N] [--label NAME] [--csv FILE]\n"
      "                    [--device cpu|cuda:N] [--graph]\n"
      "  --device   where the model runs (default cpu); inputs start on the host and\n"
      "             outputs end there, as in the server (pinned staging, one stream)\n"
      "  --graph    capture forward() as a CUDA graph for these input shapes first\n"
      "  --threads  intra-op threads (INTRA_OP_THREAD_COUNT; default LibTorch's)\n"
      "  a PATH ending in .pt2 is an AOTInductor package\n",
      stderr);
  return 1;
}

int main(int argc, char **argv) {
  static const struct option longs[] = {
      {"model", required_argument, NULL, 'm'},
      {"input", required_argument, NULL, 'i'},
      {"seconds", required_argument, NULL, 's'},
      {"warmup", required_argument, NULL, 'w'},
      {"label", required_argument, NULL, 'l'},
      {"csv", required_argument, NULL, 'c'},
      {"device", required_argument, NULL, 'd'},
      {"graph", no_argument, NULL, 'g'},
      {"threads", required_argument, NULL, 't'},
      {NULL, 0, NULL, 0},
  };
  const char *model = NULL, *label = NULL, *csv = NULL;
  struct input_arg in[MAX_INPUTS];
  int n_in = 0, warmup = 500, threads = 0;
  struct pts_device dev = {.type = PTS_DEVICE_CPU};
  bool graph = false;
  double seconds = 2.0;
  int c;
  while ((c = getopt_long(argc, argv, "", longs, NULL)) != -1) {
    switch (c) {
      case 'm':
        model = optarg;
        break;
      case 'l':
        label = optarg;
        break;
      case 'c':
        csv = optarg;
        break;
      case 'd':
        if (strncmp(optarg, "cuda:", 5) == 0) {
          dev.type = PTS_DEVICE_CUDA;
          dev.index = atoi(optarg + 5);
        } else if (strcmp(optarg, "cpu") != 0) {
          fprintf(stderr, "bench_inproc: --device '%s': expected cpu or cuda:N\n", optarg);
          return 1;
        }
        break;
      case 'g':
        graph = true;
        break;
      case 't':
        threads = atoi(optarg);
        break;
      case 's':
        seconds = atof(optarg);
        break;
      case 'w':
        warmup = atoi(optarg);
        break;
      case 'i':
        if (n_in == MAX_INPUTS || !parse_input(optarg, &in[n_in])) {
          fprintf(stderr, "bench_inproc: --input '%s': expected DTYPE:d1,d2 (at most %d)\n", optarg,
                  MAX_INPUTS);
          return 1;
        }
        n_in++;
        break;
      default:
        return usage();
    }
  }
  if (!model || n_in == 0 || seconds <= 0 || warmup < 0) return usage();
  if (!label) label = model;

  struct pts_error err;
  struct pts_torch_module *mod = NULL;
  size_t len = strlen(model);
  bool aoti = len > 4 && strcmp(model + len - 4, ".pt2") == 0;
  if ((aoti ? pts_torch_load_aoti(model, &dev, &mod, &err)
            : pts_torch_load(model, &dev, &mod, &err)) != PTS_OK) {
    fprintf(stderr, "bench_inproc: %s\n", err.msg);
    return 1;
  }
  struct pts_torch_input tin[MAX_INPUTS];
  unsigned seed = 1;
  int rc = 1;
  for (int i = 0; i < n_in; i++) in[i].data = NULL;
  for (int i = 0; i < n_in; i++) {
    if (!(in[i].data = pts_malloc(in[i].byte_size ? in[i].byte_size : 1))) goto out;
    fill_random(&in[i], &seed);
    tin[i] = (struct pts_torch_input){.name = "input",
                                      .dtype = in[i].dtype,
                                      .ndim = in[i].ndim,
                                      .dims = in[i].dims,
                                      .data = in[i].data,
                                      .byte_size = in[i].byte_size};
  }
  /* ptserve's defaults (backends/pytorch: INFERENCE_MODE true,
   * DISABLE_OPTIMIZED_EXECUTION false, INTRA_OP_THREAD_COUNT 0). */
  struct pts_torch_run_opts opts = {
      .inference_mode = true, .optimized_execution = true, .intra_op_threads = threads};
  int64_t graph_batch = n_in > 0 && tin[0].ndim > 0 ? tin[0].dims[0] : 1;
  if (graph && pts_torch_capture_graph(mod, tin, (size_t)n_in, graph_batch, graph_batch, &opts,
                                       &err) != PTS_OK) {
    fprintf(stderr, "bench_inproc: %s: %s\n", label, err.msg);
    goto out;
  }

  size_t cap = 1 << 16, n = 0;
  uint64_t *lat = pts_malloc(cap * sizeof *lat);
  if (!lat) goto out;
  uint64_t start = 0, end_at = 0, cpu_start = 0;
  for (int it = 0;; it++) {
    if (it == warmup) {
      cpu_start = clock_ns(CLOCK_THREAD_CPUTIME_ID);
      start = now_ns();
      end_at = start + (uint64_t)(seconds * 1e9);
    }
    uint64_t t0 = now_ns();
    struct pts_torch_outputs outs;
    if (pts_torch_forward(mod, tin, (size_t)n_in, &opts, &outs, &err) != PTS_OK) {
      fprintf(stderr, "bench_inproc: %s: %s\n", label, err.msg);
      pts_free(lat);
      goto out;
    }
    pts_torch_outputs_free(&outs);
    uint64_t t1 = now_ns();
    if (it < warmup) continue;
    if (n == cap) {
      uint64_t *bigger = pts_realloc(lat, 2 * cap * sizeof *lat);
      if (!bigger) break;
      lat = bigger;
      cap *= 2;
    }
    lat[n++] = t1 - t0;
    if (t1 >= end_at) break;
  }
  double elapsed = (double)(now_ns() - start) / 1e9;
  /* The calling thread's CPU per call: on a GPU, LibTorch launching the
   * kernels and waiting, what a server's instance thread spends at least
   * on the same call. Not the process's: after a parallel copy_ (a host
   * input staged into pinned memory) LibTorch's OpenMP threads spin for a
   * while, which on a many-core host is most of the process's CPU and is
   * not work of the call. */
  double cpu_us =
      n ? (double)(clock_ns(CLOCK_THREAD_CPUTIME_ID) - cpu_start) / 1e3 / (double)n : 0;
  struct ptperf_latency s;
  ptperf_latency_summarize(lat, n, &s);
  pts_free(lat);
  double per_sec = (double)n / elapsed;
  printf(
      "%s: %zu forward() calls in %.2f s on one thread: %.0f/s, mean %.1f us, p50 %.1f us, "
      "p99 %.1f us, CPU %.1f us per call (LibTorch %s)\n",
      label, n, elapsed, per_sec, s.avg_us, s.p50_us, s.p99_us, cpu_us, pts_torch_version());
  if (csv) {
    FILE *f = fopen(csv, "a");
    if (!f) {
      fprintf(stderr, "bench_inproc: can not append to '%s': %s\n", csv, strerror(errno));
      goto out;
    }
    fprintf(f, "%s,%zu,%.1f,%.2f,%.2f,%.2f,%.2f\n", label, n, per_sec, s.avg_us, s.p50_us, s.p99_us,
            cpu_us);
    fclose(f);
  }
  rc = 0;
out:
  for (int i = 0; i < n_in; i++) pts_free(in[i].data);
  pts_torch_free(mod);
  return rc;
}
