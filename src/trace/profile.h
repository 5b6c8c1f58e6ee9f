/* trace/profile.h — the operator profiler's sessions: which executions are
 * recorded, and the files they become.
 *
 * A model is armed for its next N executions (the PROFILE_EXECUTIONS model
 * parameter at load, or "profile_executions" in the model's trace setting at
 * run time). The scheduler asks for a ticket before each execution; with
 * one, the backend runs that execution under LibTorch's profiler (which is
 * thread-local: it is switched on and off on the instance thread, around
 * that one execution) and adds the operator events it saw. When the N-th
 * ticket is done, the session is written by the trace writer thread:
 *
 *   <dir>/<model>.profile<k>.trace.json  Chrome trace of the operators
 *                                         (one row per execution)
 *   <dir>/<model>.profile<k>.ops.md       per-operator table (Markdown)
 *   <dir>/<model>.profile<k>.ops.csv      the same table as CSV
 *
 * Table rows group calls by operator, input shapes and input dtypes: calls,
 * CPU time total and average, device time total and average (kernel time
 * attributed to the operator; "-" where the profiler saw none, e.g. CPU).
 * <dir> is the trace options' profile_dir (trace.h); k counts sessions in
 * the process.
 *
 * Threading: all functions are thread-safe. A ticket belongs to the thread
 * that took it until pts_profile_done.
 */
#ifndef PTS_TRACE_PROFILE_H
#define PTS_TRACE_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

/* One event of the profiler. Strings are borrowed for pts_profile_add. */
struct pts_profile_op {
  const char *name;   /* "aten::linear" */
  const char *shapes; /* input shapes, "[[1, 16], [32, 16], [32]]" ("" if unknown) */
  const char *dtypes; /* input dtypes, "[float, float, float]" ("" if unknown) */
  uint64_t start_ns;  /* profiler clock; consistent within one execution */
  uint64_t cpu_ns;    /* host duration (a device activity: its device duration) */
  uint64_t device_ns; /* device time attributed to this operator; 0 = none seen */
  bool on_device;     /* a device activity (kernel, copy), not a host operator:
                         shown on the trace's device row, not in the table */
};

struct pts_profile_ticket;

/* Arms `model` for its next `n` executions (n = 0 disarms). An armed
 * session that already recorded executions is closed and written with what
 * it has; a fresh one replaces it. INVALID_ARG for n < 0. */
enum pts_status pts_profile_arm(const char *model, int64_t n, struct pts_error *err);

/* Executions still to be recorded for `model` (0 when not armed). */
int64_t pts_profile_pending(const char *model);

/* A ticket when this execution of `model` is to be recorded, else NULL
 * (one atomic load while nothing is armed). `instance` and `batch_size` are
 * noted in the report. */
struct pts_profile_ticket *pts_profile_take(const char *model, int64_t version,
                                            const char *instance, int64_t batch_size);

/* The execution's events (copied). NULL-safe. */
void pts_profile_add(struct pts_profile_ticket *t, const struct pts_profile_op *ops, size_t n);
/* A line for the report's header: which profiler, which device, or why
 * nothing was recorded. The first note of a session wins. NULL-safe. */
void pts_profile_note(struct pts_profile_ticket *t, const char *note);

/* The execution is over (whether or not the backend added events); the
 * last ticket of a session hands it to the writer. NULL-safe. */
void pts_profile_done(struct pts_profile_ticket *t);

#endif
