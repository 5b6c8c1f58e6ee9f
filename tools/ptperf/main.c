/* ptperf — a load generator for KServe v2 servers (ptserve, tritonserver),
 * over HTTP or gRPC.
 *
 *   ptperf -m MODEL [-u HOST:PORT] [-i http|grpc [--streaming]]
 *          [--concurrency 1,2,4,8] [-f results.csv] ...
 *
 * For each concurrency: keep that many requests in flight (HTTP keep-alive
 * connections with binary tensors both ways, gRPC ModelInfer calls, or
 * gRPC ModelStreamInfer streams), measure windows of fixed length until the
 * last three agree, and report throughput, latency percentiles and the
 * server's own breakdown from its statistics endpoint. Whatever the
 * protocol, the model's metadata, configuration and statistics are read
 * over HTTP (-u).
 *
 * Threading: the main thread drives the windows and reads the statistics;
 * the load runs on threads of its own (--threads, default one: lib/load.h,
 * lib/grpc_load.h), which record into one recorder.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "core/alloc.h"
#include "ptperf/lib/grpc_load.h"
#include "ptperf/lib/grpc_msg.h"
#include "ptperf/lib/http.h"
#include "ptperf/lib/infer.h"
#include "ptperf/lib/load.h"
#include "ptperf/lib/report.h"
#include "ptperf/lib/shm.h"
#include "ptperf/lib/stats.h"
#include "ptperf/lib/window.h"

#define MAX_CONCURRENCIES 64
#define MAX_SHAPES 64
#define STABLE_WINDOWS 3
/* Different random requests sent in turn, so no cache sees one payload. */
#define N_REQUESTS 16
#define HTTP_TIMEOUT_MS 10000
#define GRPC_DEFAULT_PORT "8001"
#define MAX_GRPC_CHANNELS 64
#define MAX_THREADS 64

enum protocol { PROTO_HTTP, PROTO_GRPC, PROTO_GRPC_STREAM };

struct options {
  const char *model, *version, *url, *csv;
  enum protocol protocol;
  const char *grpc_url; /* NULL: -u's host, port 8001 */
  int grpc_channels;
  int threads; /* --threads: loads side by side, each on its own thread */
  int concurrency[MAX_CONCURRENCIES];
  int n_concurrency;
  int batch_size;
  int interval_ms;
  double stability_pct;
  int max_trials;
  bool zero_data, no_stats, quiet;
  enum ptperf_shm_kind shm; /* --shared-memory none|system|cuda */
  long cuda_device;         /* --cuda-device; -1: not given (0) */
  long output_shm_size; /* --output-shared-memory-size, bytes per output */
  uint64_t seed;
  long server_pid; /* 0: unknown */
  struct ptperf_shape_arg shapes[MAX_SHAPES];
  size_t n_shapes;
};

/* One measured window and the statistics around it. */
struct window {
  struct ptperf_samples samples;
  double seconds, infer_per_sec, p50_us;
  double cpu_client, cpu_server; /* CPU seconds used in the window; server < 0: unknown */
  double faults_server;          /* the server's minor page faults in it; < 0: unknown */
  double cpu_machine;            /* busy CPU seconds of the whole machine; < 0: unknown */
  bool have_stats;
  struct ptperf_stats before, after;
};

static void usage(FILE *f) {
  fputs(
      "usage: ptperf -m MODEL [options]\n"
      "  -m, --model-name NAME         model to load (required)\n"
      "  -x, --model-version V         version to address (default: the server's choice)\n"
      "  -u, --url HOST:PORT           HTTP endpoint: metadata, config, statistics and,\n"
      "                                with -i http, the load (default localhost:8000)\n"
      "  -i, --protocol http|grpc      protocol of the inference requests (default http)\n"
      "      --streaming               gRPC: one ModelStreamInfer stream per request in\n"
      "                                flight instead of ModelInfer calls (needs -i grpc)\n"
      "      --grpc-url HOST:PORT      gRPC endpoint (default: the host of -u, port 8001)\n"
      "      --grpc-channels N         gRPC: connections the calls share (default 1)\n"
      "      --threads N               client threads (default 1), each driving its share\n"
      "                                of the requests in flight on connections of its\n"
      "                                own (gRPC: the channels are dealt among them, at\n"
      "                                least one each), as perf_analyzer's --max-threads\n"
      "      --concurrency LIST        requests in flight, e.g. 1,2,4,8 (default 1)\n"
      "      --concurrency-range A:B[:S]  A, A+S, ... B (perf_analyzer's form; S = 1)\n"
      "  -b, --batch-size N            batch dimension of every request (default 1)\n"
      "      --shape NAME:D1,D2        dims of an input with variable dims (no batch dim)\n"
      "  -p, --measurement-interval MS window length (default 2000)\n"
      "  -s, --stability-percentage P  the last 3 windows agree within P%% (default 10)\n"
      "  -r, --max-trials N            windows at most per concurrency (default 10)\n"
      "  -f, --csv FILE                write the results as CSV too\n"
      "      --input-data random|zero  tensor contents (default random)\n"
      "      --seed N                  seed of the random data (default 1)\n"
      "      --no-server-stats         do not read the statistics endpoint\n"
      "      --server-pid PID          also report the server's CPU time per request\n"
      "                                (Linux /proc; the client's own is always reported)\n"
      "      --shared-memory none|system|cuda  HTTP: inputs and outputs in shared memory\n"
      "                                registered with the server (which needs\n"
      "                                --allow-client-shm=true), as perf_analyzer's:\n"
      "                                system = POSIX objects; cuda = GPU memory shared\n"
      "                                by CUDA IPC (libcudart loaded at run time:\n"
      "                                $PTPERF_CUDART, else libcudart.so[.13|.12])\n"
      "      --cuda-device N           GPU of the cuda regions (default 0)\n"
      "      --output-shared-memory-size B  bytes of shared memory per output (default 102400)\n"
      "  -q, --quiet                   no per-window lines on stderr\n"
      "Exit status: 0 all requests succeeded; 2 some failed; 1 could not measure.\n",
      f);
}

static bool parse_int(const char *s, long lo, long hi, long *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (end == s || *end || errno || v < lo || v > hi) return false;
  *out = v;
  return true;
}

static bool add_concurrency(struct options *o, long c) {
  if (o->n_concurrency == MAX_CONCURRENCIES) return false;
  o->concurrency[o->n_concurrency++] = (int)c;
  return true;
}

static bool parse_concurrency_list(struct options *o, const char *arg) {
  char buf[512];
  if (strlen(arg) >= sizeof buf) return false;
  strcpy(buf, arg);
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    long c;
    if (!parse_int(tok, 1, 4096, &c) || !add_concurrency(o, c)) return false;
  }
  return o->n_concurrency > 0;
}

static bool parse_concurrency_range(struct options *o, const char *arg) {
  long a, b, s = 1;
  char buf[128];
  if (strlen(arg) >= sizeof buf) return false;
  strcpy(buf, arg);
  char *save = NULL, *pa = strtok_r(buf, ":", &save), *pb = strtok_r(NULL, ":", &save),
       *ps = strtok_r(NULL, ":", &save);
  if (!pa || !parse_int(pa, 1, 4096, &a)) return false;
  b = a;
  if (pb && !parse_int(pb, a, 4096, &b)) return false;
  if (ps && !parse_int(ps, 1, 4096, &s)) return false;
  for (long c = a; c <= b; c += s)
    if (!add_concurrency(o, c)) return false;
  return true;
}

enum {
  OPT_CONCURRENCY = 256,
  OPT_RANGE,
  OPT_SHAPE,
  OPT_INPUT_DATA,
  OPT_SEED,
  OPT_NO_STATS,
  OPT_SERVER_PID,
  OPT_STREAMING,
  OPT_GRPC_URL,
  OPT_GRPC_CHANNELS,
  OPT_THREADS,
  OPT_SHARED_MEMORY,
  OPT_OUTPUT_SHM_SIZE,
  OPT_CUDA_DEVICE,
};

static bool parse_args(int argc, char **argv, struct options *o) {
  static const struct option longs[] = {
      {"model-name", required_argument, NULL, 'm'},
      {"model", required_argument, NULL, 'm'},
      {"model-version", required_argument, NULL, 'x'},
      {"url", required_argument, NULL, 'u'},
      {"protocol", required_argument, NULL, 'i'},
      {"streaming", no_argument, NULL, OPT_STREAMING},
      {"grpc-url", required_argument, NULL, OPT_GRPC_URL},
      {"grpc-channels", required_argument, NULL, OPT_GRPC_CHANNELS},
      {"threads", required_argument, NULL, OPT_THREADS},
      {"concurrency", required_argument, NULL, OPT_CONCURRENCY},
      {"concurrency-range", required_argument, NULL, OPT_RANGE},
      {"batch-size", required_argument, NULL, 'b'},
      {"shape", required_argument, NULL, OPT_SHAPE},
      {"measurement-interval", required_argument, NULL, 'p'},
      {"stability-percentage", required_argument, NULL, 's'},
      {"max-trials", required_argument, NULL, 'r'},
      {"csv", required_argument, NULL, 'f'},
      {"input-data", required_argument, NULL, OPT_INPUT_DATA},
      {"seed", required_argument, NULL, OPT_SEED},
      {"no-server-stats", no_argument, NULL, OPT_NO_STATS},
      {"server-pid", required_argument, NULL, OPT_SERVER_PID},
      {"quiet", no_argument, NULL, 'q'},
      {"shared-memory", required_argument, NULL, OPT_SHARED_MEMORY},
      {"output-shared-memory-size", required_argument, NULL, OPT_OUTPUT_SHM_SIZE},
      {"cuda-device", required_argument, NULL, OPT_CUDA_DEVICE},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  *o = (struct options){.url = "localhost:8000",
                        .batch_size = 1,
                        .interval_ms = 2000,
                        .stability_pct = 10,
                        .max_trials = 10,
                        .grpc_channels = 1,
                        .threads = 1,
                        .output_shm_size = 102400,
                        .cuda_device = -1,
                        .seed = 1};
  bool grpc = false, streaming = false;
  int c;
  long v;
  struct pts_error err;
  while ((c = getopt_long(argc, argv, "m:x:u:i:b:p:s:r:f:qh", longs, NULL)) != -1) {
    switch (c) {
      case 'm':
        o->model = optarg;
        break;
      case 'x':
        o->version = optarg;
        break;
      case 'u':
        o->url = optarg;
        break;
      case 'i':
        if (strcasecmp(optarg, "http") != 0 && strcasecmp(optarg, "grpc") != 0) {
          fprintf(stderr, "ptperf: --protocol '%s': expected http or grpc\n", optarg);
          return false;
        }
        grpc = strcasecmp(optarg, "grpc") == 0;
        break;
      case OPT_STREAMING:
        streaming = true;
        break;
      case OPT_GRPC_URL:
        o->grpc_url = optarg;
        break;
      case OPT_GRPC_CHANNELS:
        if (!parse_int(optarg, 1, MAX_GRPC_CHANNELS, &v)) {
          fprintf(stderr, "ptperf: --grpc-channels '%s': expected 1..%d\n", optarg,
                  MAX_GRPC_CHANNELS);
          return false;
        }
        o->grpc_channels = (int)v;
        break;
      case OPT_THREADS:
        if (!parse_int(optarg, 1, MAX_THREADS, &v)) {
          fprintf(stderr, "ptperf: --threads '%s': expected 1..%d\n", optarg, MAX_THREADS);
          return false;
        }
        o->threads = (int)v;
        break;
      case 'f':
        o->csv = optarg;
        break;
      case 'q':
        o->quiet = true;
        break;
      case 'h':
        usage(stdout);
        exit(0);
      case OPT_NO_STATS:
        o->no_stats = true;
        break;
      case OPT_SERVER_PID:
        if (!parse_int(optarg, 1, INT_MAX, &o->server_pid)) {
          fprintf(stderr, "ptperf: --server-pid '%s': expected a process id\n", optarg);
          return false;
        }
        break;
      case OPT_CONCURRENCY:
        if (!parse_concurrency_list(o, optarg)) {
          fprintf(stderr,
                  "ptperf: --concurrency '%s': expected a list like 1,2,4,8 "
                  "(each 1..4096, at most %d)\n",
                  optarg, MAX_CONCURRENCIES);
          return false;
        }
        break;
      case OPT_RANGE:
        if (!parse_concurrency_range(o, optarg)) {
          fprintf(stderr,
                  "ptperf: --concurrency-range '%s': expected START[:END[:STEP]] "
                  "with 1 <= START <= END <= 4096, at most %d values\n",
                  optarg, MAX_CONCURRENCIES);
          return false;
        }
        break;
      case 'b':
        if (!parse_int(optarg, 1, 1 << 20, &v)) {
          fprintf(stderr, "ptperf: --batch-size '%s': expected a positive integer\n", optarg);
          return false;
        }
        o->batch_size = (int)v;
        break;
      case 'p':
        if (!parse_int(optarg, 10, 3600 * 1000, &v)) {
          fprintf(stderr,
                  "ptperf: --measurement-interval '%s': expected milliseconds "
                  ">= 10\n",
                  optarg);
          return false;
        }
        o->interval_ms = (int)v;
        break;
      case 's':
        if (!parse_int(optarg, 1, 100, &v)) {
          fprintf(stderr, "ptperf: --stability-percentage '%s': expected 1..100\n", optarg);
          return false;
        }
        o->stability_pct = (double)v;
        break;
      case 'r':
        if (!parse_int(optarg, STABLE_WINDOWS, 1000, &v)) {
          fprintf(stderr, "ptperf: --max-trials '%s': expected %d..1000\n", optarg, STABLE_WINDOWS);
          return false;
        }
        o->max_trials = (int)v;
        break;
      case OPT_SHAPE:
        if (o->n_shapes == MAX_SHAPES) {
          fprintf(stderr, "ptperf: more than %d --shape options\n", MAX_SHAPES);
          return false;
        }
        if (ptperf_shape_arg_parse(optarg, &o->shapes[o->n_shapes++], &err)) {
          fprintf(stderr, "ptperf: %s\n", err.msg);
          return false;
        }
        break;
      case OPT_INPUT_DATA:
        if (strcmp(optarg, "random") != 0 && strcmp(optarg, "zero") != 0) {
          fprintf(stderr, "ptperf: --input-data '%s': expected random or zero\n", optarg);
          return false;
        }
        o->zero_data = strcmp(optarg, "zero") == 0;
        break;
      case OPT_SHARED_MEMORY:
        if (strcmp(optarg, "none") == 0) {
          o->shm = PTPERF_SHM_NONE;
        } else if (strcmp(optarg, "system") == 0) {
          o->shm = PTPERF_SHM_SYSTEM;
        } else if (strcmp(optarg, "cuda") == 0) {
          o->shm = PTPERF_SHM_CUDA;
        } else {
          fprintf(stderr, "ptperf: --shared-memory '%s': expected none, system or cuda\n",
                  optarg);
          return false;
        }
        break;
      case OPT_CUDA_DEVICE:
        if (!parse_int(optarg, 0, INT_MAX, &o->cuda_device)) {
          fprintf(stderr, "ptperf: --cuda-device '%s': expected a GPU index >= 0\n", optarg);
          return false;
        }
        break;
      case OPT_OUTPUT_SHM_SIZE:
        if (!parse_int(optarg, 1, 1L << 32, &o->output_shm_size)) {
          fprintf(stderr, "ptperf: --output-shared-memory-size '%s': expected bytes > 0\n",
                  optarg);
          return false;
        }
        break;
      case OPT_SEED:
        if (!parse_int(optarg, 0, LONG_MAX, &v)) {
          fprintf(stderr, "ptperf: --seed '%s': expected a non-negative integer\n", optarg);
          return false;
        }
        o->seed = (uint64_t)v;
        break;
      default:
        usage(stderr);
        return false;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "ptperf: unexpected argument '%s'\n", argv[optind]);
    return false;
  }
  if (!o->model) {
    fprintf(stderr, "ptperf: -m MODEL is required\n");
    usage(stderr);
    return false;
  }
  if (streaming && !grpc) {
    fprintf(stderr, "ptperf: --streaming needs --protocol grpc (ModelStreamInfer is gRPC only)\n");
    return false;
  }
  if (o->shm && grpc) {
    fprintf(stderr, "ptperf: --shared-memory %s is HTTP only for now\n",
            o->shm == PTPERF_SHM_CUDA ? "cuda" : "system");
    return false;
  }
  if (o->cuda_device >= 0 && o->shm != PTPERF_SHM_CUDA) {
    fprintf(stderr, "ptperf: --cuda-device needs --shared-memory cuda\n");
    return false;
  }
  if (o->cuda_device < 0) o->cuda_device = 0;
  o->protocol = !grpc ? PROTO_HTTP : streaming ? PROTO_GRPC_STREAM : PROTO_GRPC;
  if (o->n_concurrency == 0) o->concurrency[o->n_concurrency++] = 1;
  return true;
}

static const char *protocol_name(enum protocol p) {
  static const char *const names[] = {"http", "grpc", "grpc_stream"};
  return names[p];
}

/* The requests of one run, built once, in the protocol's wire form. */
struct requests {
  enum protocol protocol;
  char *http[N_REQUESTS];    /* complete HTTP messages */
  uint8_t *grpc[N_REQUESTS]; /* packed ModelInferRequests */
  size_t lens[N_REQUESTS];
  const struct ptperf_addr *addr; /* HTTP */
  const char *grpc_target;
  int grpc_channels;
  int threads;
};

static void requests_free(struct requests *q) {
  for (int i = 0; i < N_REQUESTS; i++) {
    pts_free(q->http[i]);
    pts_free(q->grpc[i]);
  }
}

/* One concurrency's load, whichever protocol carries it: n loads side by
 * side, each on its own thread with its share of the requests in flight
 * (and of the gRPC channels), all recording into rec. */
struct load {
  int n;
  struct ptperf_load *http[MAX_THREADS];
  struct ptperf_grpc_load *grpc[MAX_THREADS];
  struct ptperf_recorder rec;
  bool rec_ready; /* rec initialized (load_start ran) */
};

/* Share k of `total` dealt over n: the first total % n get one more. */
static int share(int total, int n, int k) { return total / n + (k < total % n); }

static enum pts_status load_start(const struct requests *q, int concurrency, struct load *ld,
                                  struct pts_error *err) {
  memset(ld, 0, sizeof *ld);
  ptperf_recorder_init(&ld->rec);
  ld->rec_ready = true;
  int n = q->threads < concurrency ? q->threads : concurrency;
  for (ld->n = 0; ld->n < n; ld->n++) {
    int k = ld->n, c = share(concurrency, n, k);
    enum pts_status st;
    if (q->protocol == PROTO_HTTP) {
      st = ptperf_load_start(q->addr, c, q->http, q->lens, N_REQUESTS, &ld->rec, &ld->http[k],
                             err);
    } else {
      int ch = n < q->grpc_channels ? share(q->grpc_channels, n, k) : 1;
      struct ptperf_grpc_options go = {.target = q->grpc_target,
                                       .streaming = q->protocol == PROTO_GRPC_STREAM,
                                       .channels = ch,
                                       .concurrency = c,
                                       .connect_timeout_ms = HTTP_TIMEOUT_MS,
                                       .rec = &ld->rec};
      st = ptperf_grpc_load_start(&go, q->grpc, q->lens, N_REQUESTS, &ld->grpc[k], err);
    }
    if (st) return st; /* load_stop stops the ones started */
  }
  return PTS_OK;
}

static void load_take(struct load *ld, struct ptperf_samples *s) {
  ptperf_recorder_take(&ld->rec, s);
}

/* Stops every load that started, then frees the recorder they shared. */
static void load_stop(struct load *ld) {
  for (int k = 0; k < MAX_THREADS; k++) {
    ptperf_load_stop(ld->http[k]);
    ptperf_grpc_load_stop(ld->grpc[k]);
  }
  if (ld->rec_ready) ptperf_recorder_destroy(&ld->rec);
  memset(ld, 0, sizeof *ld);
}

/* GET that must answer 200; otherwise a message with the status and body. */
static enum pts_status get_ok(const struct ptperf_addr *a, const char *path, char **body,
                              int *status, struct pts_error *err) {
  enum pts_status st = ptperf_http_get(a, path, HTTP_TIMEOUT_MS, status, body, err);
  if (st) return st;
  if (*status != 200) {
    pts_error_set(err, PTS_UNAVAILABLE, "GET %s: HTTP %d: %.300s", path, *status, *body);
    pts_free(*body);
    *body = NULL;
    return PTS_UNAVAILABLE;
  }
  return PTS_OK;
}

static enum pts_status load_model(const struct options *o, const struct ptperf_addr *a,
                                  struct ptperf_model **out, struct pts_error *err) {
  struct ptperf_model probe = {.name = (char *)o->model, .version = (char *)o->version};
  char *md_path = ptperf_model_path(&probe, "", true);
  char *cfg_path = ptperf_model_path(&probe, "config", true);
  char *md = NULL, *cfg = NULL;
  int status;
  enum pts_status st;
  if (!md_path || !cfg_path) {
    st = pts_error_set(err, PTS_NOMEM, "no memory");
    goto out;
  }
  if ((st = get_ok(a, md_path, &md, &status, err))) goto out;
  /* Without /config (not every v2 server has it) the model counts as
   * non-batching: its shapes are taken as they are. */
  struct pts_error cerr;
  if (get_ok(a, cfg_path, &cfg, &status, &cerr) != PTS_OK) {
    fprintf(stderr, "ptperf: no model configuration (%s); assuming max_batch_size 0\n", cerr.msg);
    cfg = NULL;
  }
  st = ptperf_model_parse(md, cfg, o->version, o->batch_size, o->shapes, o->n_shapes, out, err);
out:
  pts_free(md_path);
  pts_free(cfg_path);
  pts_free(md);
  pts_free(cfg);
  return st;
}

/* Reads the model's statistics; false (with why) when there are none. */
static bool read_stats(const struct ptperf_addr *a, const char *path, const char *model,
                       struct ptperf_stats *s, char *why, size_t why_n) {
  struct pts_error err;
  char *body = NULL;
  int status;
  bool ok = get_ok(a, path, &body, &status, &err) == PTS_OK &&
            ptperf_stats_parse(body, model, s, &err) == PTS_OK;
  if (!ok) snprintf(why, why_n, "%s", err.msg);
  pts_free(body);
  return ok;
}

static double timeval_s(struct timeval tv) { return (double)tv.tv_sec + (double)tv.tv_usec / 1e6; }

/* CPU seconds this process (the load thread and this one) has used. */
static double self_cpu_s(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return timeval_s(ru.ru_utime) + timeval_s(ru.ru_stime);
}

/* CPU seconds and minor page faults of another process (proc(5): minflt,
 * utime and stime are fields 10, 14 and 15 of /proc/PID/stat, after the
 * parenthesised command name); false when unknown. The faults say whether
 * the server is still growing its memory while it is measured: a page it
 * touches for the first time, or again after its allocator gave it back. */
static bool pid_stat(long pid, double *cpu_s, double *minflt) {
  if (pid <= 0) return false;
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%ld/stat", pid);
  FILE *f = fopen(path, "r");
  if (!f) return false;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char *p = strrchr(buf, ')');
  unsigned long long mf, ut, st;
  if (!p || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %llu %*u %*u %*u %llu %llu", &mf, &ut,
                   &st) != 3)
    return false;
  long hz = sysconf(_SC_CLK_TCK);
  if (hz <= 0) return false;
  *cpu_s = (double)(ut + st) / (double)hz;
  *minflt = (double)mf;
  return true;
}

/* Busy CPU seconds of the whole machine so far (proc(5): the first line of
 * /proc/stat, in USER_HZ ticks; idle and iowait are not busy); -1 when
 * unknown. */
static double machine_busy_s(void) {
  FILE *f = fopen("/proc/stat", "r");
  if (!f) return -1;
  unsigned long long v[8] = {0};
  int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
                 &v[4], &v[5], &v[6], &v[7]);
  fclose(f);
  long hz = sysconf(_SC_CLK_TCK);
  if (n != 8 || hz <= 0) return -1;
  unsigned long long busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7]; /* all but idle, iowait */
  return (double)busy / (double)hz;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_until(double t) {
  for (;;) {
    double left = t - now_s();
    if (left <= 0) return;
    struct timespec ts = {.tv_sec = (time_t)left,
                          .tv_nsec = (long)((left - (double)(time_t)left) * 1e9)};
    nanosleep(&ts, NULL);
  }
}

/* The last STABLE_WINDOWS windows (or all, if fewer) as one result. */
static enum pts_status merge_windows(const struct options *o, struct window *w, int n,
                                     struct ptperf_result *r, struct pts_error *err) {
  int first = n > STABLE_WINDOWS ? n - STABLE_WINDOWS : 0;
  size_t total = 0;
  for (int i = first; i < n; i++) total += w[i].samples.n;
  uint64_t *all = pts_malloc((total ? total : 1) * sizeof *all);
  if (!all) return pts_error_set(err, PTS_NOMEM, "no memory to merge %zu latencies", total);
  size_t at = 0;
  bool stats = true;
  double cpu_client = 0, cpu_server = 0, cpu_machine = 0, faults = 0;
  for (int i = first; i < n; i++) {
    if (w[i].samples.n) /* lat_ns is NULL when nothing completed */
      memcpy(all + at, w[i].samples.lat_ns, w[i].samples.n * sizeof *all);
    at += w[i].samples.n;
    r->seconds += w[i].seconds;
    r->errors += w[i].samples.errors;
    stats &= w[i].have_stats;
    cpu_client += w[i].cpu_client;
    cpu_server = cpu_server < 0 || w[i].cpu_server < 0 ? -1 : cpu_server + w[i].cpu_server;
    faults = faults < 0 || w[i].faults_server < 0 ? -1 : faults + w[i].faults_server;
    cpu_machine = cpu_machine < 0 || w[i].cpu_machine < 0 ? -1 : cpu_machine + w[i].cpu_machine;
  }
  ptperf_latency_summarize(all, total, &r->lat);
  pts_free(all);
  r->infer_per_sec = r->seconds > 0 ? (double)total * o->batch_size / r->seconds : 0;
  r->client_cpu_us = total ? cpu_client * 1e6 / (double)total : -1;
  r->server_cpu_us = total && cpu_server >= 0 ? cpu_server * 1e6 / (double)total : -1;
  r->server_faults = total && faults >= 0 ? faults / (double)total : -1;
  /* What neither ptperf nor the server used: other processes competing for
   * the cores, as a share of all the cores' time. */
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  r->other_cpu_pct = -1;
  if (cpu_server >= 0 && cpu_machine >= 0 && cores > 0 && r->seconds > 0) {
    double other = cpu_machine - cpu_server - cpu_client;
    r->other_cpu_pct = other > 0 ? 100.0 * other / ((double)cores * r->seconds) : 0;
  }
  if (stats) ptperf_stats_delta(&w[first].before, &w[n - 1].after, &r->server);
  return PTS_OK;
}

/* One concurrency: windows until the last STABLE_WINDOWS agree on
 * throughput and median latency, or max_trials. */
static enum pts_status measure(const struct options *o, const struct ptperf_addr *a,
                               const struct ptperf_model *m, const char *stats_path,
                               const struct requests *q, int concurrency, struct ptperf_result *r,
                               struct pts_error *err) {
  memset(r, 0, sizeof *r);
  r->model = m->name;
  r->protocol = protocol_name(o->protocol);
  r->batch_size = o->batch_size;
  r->concurrency = concurrency;
  struct window *w = pts_calloc((size_t)o->max_trials, sizeof *w);
  double *thr = pts_calloc((size_t)o->max_trials, sizeof *thr);
  double *p50 = pts_calloc((size_t)o->max_trials, sizeof *p50);
  struct load load = {0};
  enum pts_status st = PTS_OK;
  if (!w || !thr || !p50) {
    st = pts_error_set(err, PTS_NOMEM, "no memory for %d windows", o->max_trials);
    goto out;
  }
  if ((st = load_start(q, concurrency, &load, err))) goto out;

  char why[512];
  struct ptperf_stats before = {0};
  bool have_before = stats_path && read_stats(a, stats_path, m->name, &before, why, sizeof why);
  struct ptperf_samples discard = {0};
  load_take(&load, &discard); /* whatever completed before the first window */
  ptperf_samples_free(&discard);
  double t0 = now_s(), c0 = self_cpu_s(), m0 = machine_busy_s(), s0, f0;
  bool have_s0 = pid_stat(o->server_pid, &s0, &f0);
  int n = 0;
  while (n < o->max_trials) {
    struct window *cur = &w[n];
    sleep_until(t0 + o->interval_ms / 1000.0);
    load_take(&load, &cur->samples);
    double t1 = now_s(), c1 = self_cpu_s(), m1 = machine_busy_s(), s1, f1;
    bool have_s1 = pid_stat(o->server_pid, &s1, &f1);
    cur->seconds = t1 - t0;
    cur->cpu_client = c1 - c0;
    cur->cpu_server = have_s0 && have_s1 ? s1 - s0 : -1;
    cur->faults_server = have_s0 && have_s1 ? f1 - f0 : -1;
    cur->cpu_machine = m0 >= 0 && m1 >= 0 ? m1 - m0 : -1;
    t0 = t1;
    c0 = c1;
    m0 = m1;
    have_s0 = have_s1;
    s0 = s1;
    f0 = f1;
    cur->before = before;
    cur->have_stats = have_before && stats_path &&
                      read_stats(a, stats_path, m->name, &cur->after, why, sizeof why);
    have_before = cur->have_stats;
    before = cur->after;

    struct ptperf_latency lat;
    uint64_t *copy = pts_malloc((cur->samples.n ? cur->samples.n : 1) * sizeof *copy);
    if (!copy) {
      st = pts_error_set(err, PTS_NOMEM, "no memory for a window's latencies");
      n++;
      goto out;
    }
    if (cur->samples.n) memcpy(copy, cur->samples.lat_ns, cur->samples.n * sizeof *copy);
    ptperf_latency_summarize(copy, cur->samples.n, &lat);
    pts_free(copy);
    cur->infer_per_sec = (double)cur->samples.n * o->batch_size / cur->seconds;
    thr[n] = cur->infer_per_sec;
    p50[n] = lat.p50_us;
    n++;
    if (!o->quiet)
      fprintf(stderr,
              "  concurrency %d, window %d: %.1f infer/s, p50 %.0f us, p99 %.0f us, "
              "%llu errors%s%s\n",
              concurrency, n, cur->infer_per_sec, lat.p50_us, lat.p99_us,
              (unsigned long long)cur->samples.errors,
              cur->samples.first_error[0] ? "; first: " : "", cur->samples.first_error);
    if (ptperf_stable(thr, (size_t)n, STABLE_WINDOWS, o->stability_pct) &&
        ptperf_stable(p50, (size_t)n, STABLE_WINDOWS, o->stability_pct)) {
      r->stable = true;
      break;
    }
  }
  r->windows = n;
  if (!r->stable)
    fprintf(stderr,
            "ptperf: concurrency %d: not stable within %.0f%% after %d windows; "
            "reporting the last %d\n",
            concurrency, o->stability_pct, n, STABLE_WINDOWS);
  st = merge_windows(o, w, n, r, err);
out:
  load_stop(&load);
  for (int i = 0; w && i < o->max_trials; i++) ptperf_samples_free(&w[i].samples);
  pts_free(w);
  pts_free(thr);
  pts_free(p50);
  return st;
}

static int run(const struct options *o) {
  struct pts_error err;
  struct ptperf_addr addr;
  struct ptperf_model *m = NULL;
  struct requests q = {
      .protocol = o->protocol, .addr = &addr, .grpc_channels = o->grpc_channels,
      .threads = o->threads};
  char *stats_path = NULL;
  struct ptperf_result *results = NULL;
  FILE *csv = NULL;
  struct ptperf_shm shm = {0};
  int rc = 1;

  if (ptperf_addr_resolve(o->url, &addr, &err) || load_model(o, &addr, &m, &err)) {
    fprintf(stderr, "ptperf: %s\n", err.msg);
    goto out;
  }
  char host[300], grpc_target[300];
  snprintf(host, sizeof host, "%s:%s", addr.host, addr.port);
  /* The gRPC port of a server whose HTTP port is given: tritonserver's
   * (and ptserve's) default, on the same host. */
  snprintf(grpc_target, sizeof grpc_target, strchr(addr.host, ':') ? "[%s]:%s" : "%s:%s", addr.host,
           GRPC_DEFAULT_PORT);
  q.grpc_target = o->grpc_url ? o->grpc_url : grpc_target;
  struct ptperf_shm_options so = {.kind = o->shm,
                                  .device = (int)o->cuda_device,
                                  .n_requests = N_REQUESTS,
                                  .seed0 = o->seed,
                                  .zero_data = o->zero_data,
                                  .output_bytes = (size_t)o->output_shm_size};
  if (o->shm && ptperf_shm_setup(&addr, m, &so, &shm, &err) != PTS_OK) {
    fprintf(stderr, "ptperf: %s\n", err.msg);
    goto out;
  }
  for (int i = 0; i < N_REQUESTS; i++) {
    uint64_t seed = o->seed + (uint64_t)i;
    enum pts_status st =
        o->shm ? ptperf_shm_request_build(m, &shm, (size_t)i, host, &q.http[i], &q.lens[i], &err)
        : o->protocol == PROTO_HTTP
            ? ptperf_request_build(m, host, seed, o->zero_data, &q.http[i], &q.lens[i], &err)
            : ptperf_grpc_request_build(m, seed, o->zero_data, &q.grpc[i], &q.lens[i], &err);
    if (st) {
      fprintf(stderr, "ptperf: %s\n", err.msg);
      goto out;
    }
  }
  if (!o->no_stats) {
    char why[512];
    struct ptperf_stats probe;
    stats_path = ptperf_model_path(m, "stats", true);
    if (stats_path && !read_stats(&addr, stats_path, m->name, &probe, why, sizeof why)) {
      fprintf(stderr, "ptperf: no server-side breakdown: %s\n", why);
      pts_free(stats_path);
      stats_path = NULL;
    }
  }
  if (o->csv && !(csv = fopen(o->csv, "w"))) {
    fprintf(stderr, "ptperf: can not write --csv '%s': %s\n", o->csv, strerror(errno));
    goto out;
  }
  if (!(results = pts_calloc((size_t)o->n_concurrency, sizeof *results))) {
    fprintf(stderr, "ptperf: no memory\n");
    goto out;
  }
  fprintf(stderr,
          "ptperf: model '%s', %s at %s, batch %d, %d ms windows, stable = last %d within "
          "%.0f%%\n",
          m->name, protocol_name(o->protocol), o->protocol == PROTO_HTTP ? host : q.grpc_target,
          o->batch_size, o->interval_ms, STABLE_WINDOWS, o->stability_pct);
  uint64_t errors = 0;
  for (int i = 0; i < o->n_concurrency; i++) {
    if (measure(o, &addr, m, stats_path, &q, o->concurrency[i], &results[i], &err)) {
      fprintf(stderr, "ptperf: concurrency %d: %s\n", o->concurrency[i], err.msg);
      goto out;
    }
    errors += results[i].errors;
  }
  static const char *const how[] = {
      "HTTP/1.1",
      "gRPC ModelInfer",
      "gRPC ModelStreamInfer (a stream per request in flight)",
  };
  static const char *const where[] = {
      [PTPERF_SHM_NONE] = "",
      [PTPERF_SHM_SYSTEM] = " with inputs and outputs in system shared memory",
      [PTPERF_SHM_CUDA] = " with inputs and outputs in CUDA shared memory",
  };
  printf("Model '%s', batch size %d, %s%s, %s\n", m->name, o->batch_size, how[o->protocol],
         where[o->shm],
         stats_path ? "server breakdown from the statistics endpoint (us per request)"
                    : "no server statistics");
  ptperf_report_table_header(stdout);
  for (int i = 0; i < o->n_concurrency; i++) ptperf_report_table_row(stdout, &results[i]);
  if (csv) {
    ptperf_report_csv_header(csv);
    for (int i = 0; i < o->n_concurrency; i++) ptperf_report_csv_row(csv, &results[i]);
  }
  if (errors) fprintf(stderr, "ptperf: %llu requests failed\n", (unsigned long long)errors);
  rc = errors ? 2 : 0;
out:
  if (csv && fclose(csv) != 0 && rc != 1) {
    fprintf(stderr, "ptperf: writing --csv '%s': %s\n", o->csv, strerror(errno));
    rc = 1;
  }
  pts_free(results);
  pts_free(stats_path);
  requests_free(&q);
  ptperf_shm_teardown(&addr, &shm);
  ptperf_model_free(m);
  return rc;
}

int main(int argc, char **argv) {
  struct options o;
  if (!parse_args(argc, argv, &o)) return 1;
  return run(&o);
}
