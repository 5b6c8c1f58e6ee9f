/* backends/pytorch/intra.h — how many intra-op threads a model instance
 * gives LibTorch when its config does not say (INTRA_OP_THREAD_COUNT).
 *
 * LibTorch's own default is one thread per core for every thread that
 * calls into it. ptserve calls forward() from one thread per instance, and
 * run to completion (docs/internals/scheduler.md) lends an idle instance to
 * the thread that received the request, so a model's forward() runs at
 * most `instances` times at once. With LibTorch's default that is up to
 * instances × cores threads on `cores` cores: on a small machine, serving
 * a model with two instances, four threads fight for two cores (issue
 * #13). The rule here caps the product at the core count:
 *
 *   INTRA_OP_THREAD_COUNT set (> 0)  → that value (the user's word wins);
 *   otherwise                        → max(1, cores / instances), and never
 *                                      more than LibTorch's own default
 *                                      (which follows OMP_NUM_THREADS).
 *
 * `cores` is what this process may run on (its CPU affinity mask), not a
 * cgroup CPU quota. Instances of other models are not counted: each model
 * is sized as if it had the machine to itself.
 *
 * Threading: pure functions; thread-safe.
 */
#ifndef PTS_BACKENDS_PYTORCH_INTRA_H
#define PTS_BACKENDS_PYTORCH_INTRA_H

/* What the choice was made from, for the log line. */
struct pts_intra_choice {
  int threads;          /* the pool size each instance thread sets */
  int configured;       /* INTRA_OP_THREAD_COUNT, 0 = not set */
  int cores;            /* pts_intra_cores() */
  int instances;        /* instances of the model (every group, every kind) */
  int libtorch_default; /* LibTorch's pool size at start-up */
};

/* Cores this process may run on (sched_getaffinity where it exists, else
 * the online CPUs); at least 1. */
int pts_intra_cores(void);

/* The rule above. `configured` 0 = not set; `instances` < 1 counts as 1;
 * `libtorch_default` < 1 is taken as `cores`. Fills and returns *out's
 * `threads`. */
int pts_intra_choose(int configured, int cores, int instances, int libtorch_default,
                     struct pts_intra_choice *out);

#endif
