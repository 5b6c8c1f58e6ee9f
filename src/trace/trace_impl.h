/* trace/trace_impl.h — what the files of src/trace/ share: the trace
 * record (record.c), its file formats (format.c), the writer thread's
 * queue (writer.c). The files call each other one way: trace.c uses
 * profile.c, format.c, writer.c and record.c; profile.c uses writer.c;
 * format.c uses record.c.
 * Private to src/trace/ (and its unit tests).
 *
 * Threading: the writer functions are thread-safe; a trace record belongs
 * to one thread at a time until it is handed to the writer.
 */
#ifndef PTS_TRACE_TRACE_IMPL_H
#define PTS_TRACE_TRACE_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/status.h"
#include "trace/trace.h"

/* More than every point once: a point may repeat (it never should today). */
#define TRACE_MAX_STAMPS 24

/* One TENSORS record, rendered when it was taken. */
struct trace_tensor {
  char *activity; /* owned */
  char *json;     /* owned: the "tensor" object */
  struct trace_tensor *next;
};

struct pts_trace {
  uint64_t id;
  unsigned level;
  char *sample_model; /* owned: the name it was sampled under (its settings) */
  char *model;        /* owned: as resolved (set_model), else NULL */
  int64_t version;    /* -1 until known */
  char *request_id;   /* owned, may be NULL */
  size_t n_stamps;
  struct {
    enum pts_trace_point point;
    uint64_t ns;
  } stamps[TRACE_MAX_STAMPS];
  struct trace_tensor *tensors, *tensors_tail;
  struct pts_trace *next; /* in a collection */
};

/* record.c: frees a record, or a list of them (NULL-safe). */
void trace_free(struct pts_trace *t);
void trace_free_list(struct pts_trace *list);

/* format.c: a list of ended traces as Triton's trace JSON (one array) and
 * as a Chrome trace ({"traceEvents": [...]}), to a stream (errors are the
 * stream's), or to `path` and `path`.chrome.json (errors are logged). */
void trace_format_triton(FILE *f, const struct pts_trace *list);
void trace_format_chrome(FILE *f, const struct pts_trace *list);
void trace_write_files(const char *path, const struct pts_trace *list);

/* writer.c: the writer thread. start/stop are called by init/shutdown
 * (stop runs everything queued first). submit queues run(arg), which
 * writes and frees arg, for the writer thread; without a running writer
 * (or the memory to queue it) it runs at once, on the caller's thread.
 * trace.c hands it collections of traces, profile.c finished operator
 * profiles. */
enum pts_status trace_writer_start(struct pts_error *err);
void trace_writer_stop(void);
void trace_writer_submit(void (*run)(void *arg), void *arg);

/* profile.c's part of init/shutdown: the output directory (owned copy;
 * NULL = working directory), then, at shutdown, sessions not yet complete
 * are written with what they have. */
enum pts_status profile_init(const char *dir, struct pts_error *err);
void profile_shutdown(void);

#endif
