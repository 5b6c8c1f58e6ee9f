/* tests/unit/torture/torture.h — allocation-failure walks (curl's "torture"
 * idea) over pts_alloc_fail_after from core/alloc.h.
 *
 * A step is one complete operation (load a config, decode a request, run an
 * inference) that sets up and tears down everything it allocates. The walk
 * runs it with allocation n made to fail, for n = 0, 1, 2, ... until a run
 * completes without reaching the injected failure. Every failed run must
 * end in a clean error (a status and a message); ASan/LSan in the sanitizer
 * build prove that none of them crashed or leaked.
 *
 * jansson is pointed at pts_malloc too, so the JSON parser's own allocations
 * fail in turn, as they would when the process is really out of memory.
 *
 * Threading: a walk owns the process-wide failure countdown; run one at a
 * time (cmocka runs tests sequentially).
 */
#ifndef PTS_TEST_TORTURE_H
#define PTS_TEST_TORTURE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/status.h"

/* Runs the operation once; returns its status with err filled. */
typedef enum pts_status (*torture_step_fn)(void *ctx, struct pts_error *err);

struct torture_result {
  long runs;                    /* runs with an injected failure */
  long failed;                  /* of those, runs that returned an error */
  long nomem;                   /* of those, errors whose code was NOMEM */
  int bad_messages;             /* errors without a message (must stay 0) */
  enum pts_status final_status; /* the run without any injected failure */
  char first_error[PTS_ERROR_MSG_MAX];
};

static void *torture_json_malloc(size_t n) { return pts_malloc(n); }
static void torture_json_free(void *p) { pts_free(p); }

/* Walks `step` with failures injected at allocation 0, 1, 2, ... and stops
 * at the first run that needs no more than n allocations, or after
 * `max_runs` runs. */
static struct torture_result torture_walk(torture_step_fn step, void *ctx, long max_runs) {
  struct torture_result r;
  memset(&r, 0, sizeof r);
  json_set_alloc_funcs(torture_json_malloc, torture_json_free);
  for (long n = 0; n < max_runs; n++) {
    struct pts_error err;
    pts_error_clear(&err);
    /* A sentinel allocation after the operation tells whether the countdown
     * was reached inside it (or, when the step made exactly n allocations,
     * right after it: that run counts once more, harmlessly). */
    pts_alloc_fail_after(n);
    enum pts_status st = step(ctx, &err);
    void *probe = pts_malloc(1);
    pts_alloc_fail_after(-1);
    bool reached = probe == NULL;
    pts_free(probe);
    if (!reached) {
      r.final_status = st;
      break;
    }
    r.runs++;
    if (st != PTS_OK) {
      r.failed++;
      if (st == PTS_NOMEM) r.nomem++;
      if (err.msg[0] == '\0') r.bad_messages++;
      if (!r.first_error[0]) snprintf(r.first_error, sizeof r.first_error, "%s", err.msg);
      if (getenv("PTS_TORTURE_VERBOSE")) /* lists every error the walk produced */
        fprintf(stderr, "  alloc %ld: %s: %s\n", n, pts_status_name(st), err.msg);
    }
  }
  json_set_alloc_funcs(malloc, free);
  return r;
}

static void torture_report(const char *what, const struct torture_result *r) {
  fprintf(stderr, "torture %s: %ld allocation points, %ld failed cleanly (%ld as NOMEM)\n", what,
          r->runs, r->failed, r->nomem);
}

#endif
