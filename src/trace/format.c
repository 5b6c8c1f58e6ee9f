/* trace/format.c — the two trace file formats, written from a list of
 * ended traces: Triton's trace JSON (one array) and a Chrome trace
 * ({"traceEvents": [...]}) beside it. Runs on the writer thread (trace.c
 * hands the job over), never on an event loop or an instance thread.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/log.h"
#include "trace/tbuf.h"
#include "trace/trace_impl.h"

static void put_json_str(FILE *f, const char *s) {
  struct tbuf b;
  tbuf_init(&b);
  tbuf_json_str(&b, s);
  if (b.data) fputs(b.data, f);
  tbuf_free(&b);
}

static const char *model_of(const struct pts_trace *t) {
  return t->model ? t->model : t->sample_model;
}

/* Triton's trace JSON: per trace, a header object (id, model_name,
 * model_version, request_id when the request had one), one object with all
 * its timestamps in the order they were taken, and one per TENSORS record. */
void trace_format_triton(FILE *f, const struct pts_trace *list) {
  fputs("[", f);
  bool first = true;
  for (const struct pts_trace *t = list; t; t = t->next) {
    fprintf(f, "%s\n{\"id\":%" PRIu64 ",\"model_name\":", first ? "" : ",", t->id);
    first = false;
    put_json_str(f, model_of(t));
    fprintf(f, ",\"model_version\":%" PRId64, t->version);
    if (t->request_id) {
      fputs(",\"request_id\":", f);
      put_json_str(f, t->request_id);
    }
    fputs("}", f);
    if (t->n_stamps) {
      fprintf(f, ",\n{\"id\":%" PRIu64 ",\"timestamps\":[", t->id);
      for (size_t i = 0; i < t->n_stamps; i++)
        fprintf(f, "%s{\"name\":\"%s\",\"ns\":%" PRIu64 "}", i ? "," : "",
                pts_trace_point_name(t->stamps[i].point), t->stamps[i].ns);
      fputs("]}", f);
    }
    for (const struct trace_tensor *r = t->tensors; r; r = r->next) {
      fprintf(f, ",\n{\"id\":%" PRIu64 ",\"activity\":", t->id);
      put_json_str(f, r->activity);
      fprintf(f, ",\"tensor\":%s}", r->json);
    }
  }
  fputs("\n]\n", f);
}

/* The slices a person sees per request, parents before children. */
static const struct {
  const char *name;
  enum pts_trace_point from, to;
} PHASES[] = {
    {"HTTP receive", PTS_TRACE_HTTP_RECV_START, PTS_TRACE_HTTP_RECV_END},
    {"gRPC wait/read", PTS_TRACE_GRPC_WAITREAD_START, PTS_TRACE_GRPC_WAITREAD_END},
    {"request", PTS_TRACE_REQUEST_START, PTS_TRACE_REQUEST_END},
    {"queue", PTS_TRACE_QUEUE_START, PTS_TRACE_COMPUTE_START},
    {"compute", PTS_TRACE_COMPUTE_START, PTS_TRACE_COMPUTE_END},
    {"compute input", PTS_TRACE_COMPUTE_START, PTS_TRACE_COMPUTE_INPUT_END},
    {"compute infer", PTS_TRACE_COMPUTE_INPUT_END, PTS_TRACE_COMPUTE_OUTPUT_START},
    {"compute output", PTS_TRACE_COMPUTE_OUTPUT_START, PTS_TRACE_COMPUTE_END},
    {"HTTP send", PTS_TRACE_HTTP_SEND_START, PTS_TRACE_HTTP_SEND_END},
    {"gRPC send", PTS_TRACE_GRPC_SEND_START, PTS_TRACE_GRPC_SEND_END},
};

static bool stamp_of(const struct pts_trace *t, enum pts_trace_point p, uint64_t *ns) {
  for (size_t i = 0; i < t->n_stamps; i++)
    if (t->stamps[i].point == p) return *ns = t->stamps[i].ns, true;
  return false;
}

/* Microseconds with three decimals, exact (a double would lose the
 * nanoseconds of a monotonic clock that counts from boot). */
static void put_us(FILE *f, uint64_t ns) {
  fprintf(f, "%" PRIu64 ".%03u", ns / 1000, (unsigned)(ns % 1000));
}

/* Model (and version) → Chrome process id, in order of appearance. */
struct pids {
  const struct pts_trace *first[256];
  size_t n;
};

static int pid_of(struct pids *p, const struct pts_trace *t, bool *is_new) {
  *is_new = false;
  for (size_t i = 0; i < p->n; i++)
    if (p->first[i]->version == t->version && strcmp(model_of(p->first[i]), model_of(t)) == 0)
      return (int)i + 1;
  if (p->n == sizeof p->first / sizeof p->first[0]) return (int)p->n; /* share the last */
  p->first[p->n++] = t;
  *is_new = true;
  return (int)p->n;
}

/* A Chrome trace (chrome://tracing, ui.perfetto.dev): one process per model
 * version, one row per request (the request's trace id), a slice per phase. */
void trace_format_chrome(FILE *f, const struct pts_trace *list) {
  struct pids pids = {.n = 0};
  fputs(
      "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"producer\":\"ptserve\"},"
      "\"traceEvents\":[",
      f);
  bool first = true;
  for (const struct pts_trace *t = list; t; t = t->next) {
    bool is_new;
    int pid = pid_of(&pids, t, &is_new);
    if (is_new) {
      fprintf(f,
              "%s\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{"
              "\"name\":",
              first ? "" : ",", pid);
      first = false;
      struct tbuf b;
      tbuf_init(&b);
      tbuf_printf(&b, "model %s version %" PRId64, model_of(t), t->version);
      put_json_str(f, b.data ? b.data : "model");
      tbuf_free(&b);
      fputs("}}", f);
    }
    fprintf(f,
            "%s\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%" PRIu64
            ",\"args\":{\"name\":\"request %" PRIu64 "\"}}",
            first ? "" : ",", pid, t->id, t->id);
    first = false;
    for (size_t k = 0; k < sizeof PHASES / sizeof PHASES[0]; k++) {
      uint64_t from, to;
      if (!stamp_of(t, PHASES[k].from, &from) || !stamp_of(t, PHASES[k].to, &to) || to < from)
        continue;
      fprintf(f, ",\n{\"name\":\"%s\",\"cat\":\"request\",\"ph\":\"X\",\"ts\":", PHASES[k].name);
      put_us(f, from);
      fputs(",\"dur\":", f);
      put_us(f, to - from);
      fprintf(f, ",\"pid\":%d,\"tid\":%" PRIu64 ",\"args\":{\"trace_id\":%" PRIu64, pid, t->id,
              t->id);
      if (t->request_id) {
        fputs(",\"request_id\":", f);
        put_json_str(f, t->request_id);
      }
      fputs("}}", f);
    }
  }
  fputs("\n]}\n", f);
}

/* ------------------------------------------------------------ files */

static bool write_file(const char *path, void (*format)(FILE *, const struct pts_trace *),
                       const struct pts_trace *list) {
  FILE *f = fopen(path, "w");
  if (!f) {
    PTS_LOG_ERROR("failed to open trace file '%s': %s", path, strerror(errno));
    return false;
  }
  format(f, list);
  bool ok = !ferror(f);
  if (fclose(f) != 0) ok = false;
  if (!ok) PTS_LOG_ERROR("failed to write trace file '%s': %s", path, strerror(errno));
  return ok;
}

void trace_write_files(const char *path, const struct pts_trace *list) {
  size_t n = 0;
  for (const struct pts_trace *t = list; t; t = t->next) n++;
  if (!write_file(path, trace_format_triton, list)) return;
  size_t len = strlen(path) + sizeof ".chrome.json";
  char *chrome = pts_malloc(len);
  if (chrome) {
    snprintf(chrome, len, "%s.chrome.json", path);
    write_file(chrome, trace_format_chrome, list);
    pts_free(chrome);
  }
  PTS_LOG_VERBOSE(1, "wrote %zu traces to '%s' (and its .chrome.json)", n, path);
}
