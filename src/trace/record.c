/* trace/record.c — the trace record's basics, shared by the files of
 * src/trace/: the names of the trace points, and freeing records. The
 * bottom of src/trace/: trace.c makes records, format.c writes them, both
 * name points and free records through this file.
 */
#include "core/alloc.h"
#include "trace/trace_impl.h"

const char *pts_trace_point_name(enum pts_trace_point p) {
  static const char *const names[] = {
#define XX(n) #n,
      PTS_TRACE_POINT_MAP(XX)
#undef XX
  };
  return (unsigned)p < PTS_TRACE_POINT_COUNT ? names[p] : "";
}

void trace_free(struct pts_trace *t) {
  if (!t) return;
  while (t->tensors) {
    struct trace_tensor *r = t->tensors;
    t->tensors = r->next;
    pts_free(r->activity);
    pts_free(r->json);
    pts_free(r);
  }
  pts_free(t->sample_model);
  pts_free(t->model);
  pts_free(t->request_id);
  pts_free(t);
}

void trace_free_list(struct pts_trace *list) {
  while (list) {
    struct pts_trace *next = list->next;
    trace_free(list);
    list = next;
  }
}
