/* scheduler/sequence.h — the sequence batcher (`sequence_batching`): which
 * request of which sequence runs next, on which instance, with which control
 * values and which implicit state.
 *
 * Requests of a model with sequence_batching carry a correlation id
 * (`sequence_id`, an integer or a string) and the START/END flags. A
 * sequence begins with a START request and ends after its END request has
 * run; its requests run one at a time, in arrival order, each as one row of
 * a batch (so a request's batch size must be 1). Two strategies, as
 * Triton's:
 *
 *   direct  each instance has max(1, max_batch_size) slots; a new sequence
 *           takes a free slot and keeps it (and its instance) until it ends
 *           or idles out. An instance's batch has one row per slot, up to
 *           its highest slot in use: row i is the next request of slot i's
 *           sequence, or a padding row (READY false, no request) when that
 *           slot is free or its sequence has nothing queued — so a model
 *           sees a sequence at the same row for the sequence's life, as in
 *           Triton. It waits up to direct.max_queue_delay_microseconds for
 *           every active slot to have a request. Sequences that find no free
 *           slot wait in a backlog, in arrival order, for one.
 *   oldest  at most max_candidate_sequences sequences are candidates (the
 *           rest wait in a backlog); any free instance batches the next
 *           requests of the candidates, oldest request first, up to
 *           max_batch_size, with the dynamic batcher's rules for
 *           preferred_batch_size and max_queue_delay_microseconds.
 *
 * A sequence with nothing queued or running for max_sequence_idle_microseconds
 * is released: its slot goes to the next sequence, its state is dropped, and
 * a later request for it without START is refused like an unknown one.
 *
 * Control inputs (CONTROL_SEQUENCE_START, _END, _READY, _CORRID) and
 * implicit states (`state`) are tensors the model takes after its own inputs
 * (config/model_config_sequence.h, the execution config). This module
 * builds them for a batch: START/END from the request's flags, READY true
 * (false on a padding row), CORRID the id (0 or "" on a padding row); a
 * state input is the sequence's state, or the initial state (zeros or
 * initial_state's data file) at START and on a padding row; after the batch
 * ran, each row of a state output becomes its sequence's state (padding
 * rows' are dropped).
 *
 * Ownership: the scheduler owns the pts_seq and the pendings; a pending the
 * sequence batcher holds is the scheduler's, lent until taken by choose.
 *
 * Threading: every function that takes `now_ns` or changes which requests
 * are queued (push, choose, done, queued, drain) must be called under the
 * scheduler's lock. build_input and keep_state touch only the state of
 * sequences whose requests are in the caller's batch — a sequence has one
 * request running at a time — and run without the lock, on the instance
 * thread that runs the batch.
 */
#ifndef PTS_SCHEDULER_SEQUENCE_H
#define PTS_SCHEDULER_SEQUENCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "core/status.h"
#include "model_config.pb-c.h"
#include "scheduler/queue.h"
#include "tensor/tensor.h"

struct pts_seq;

/* Sets up the batcher of a model whose completed config has
 * sequence_batching, for `n_instances` instances. Reads initial_state data
 * files from <model_dir>/initial_state/ (a missing or short file fails the
 * load, naming it). `model_name` and `cfg` are borrowed for the batcher's
 * life. Caller frees *out with pts_seq_destroy. */
enum pts_status pts_seq_create(const Inference__ModelConfig *cfg, const char *model_name,
                               const char *model_dir, size_t n_instances, struct pts_seq **out,
                               struct pts_error *err);
/* NULL-safe; nothing may be queued (pts_seq_queued == 0). */
void pts_seq_destroy(struct pts_seq *q);

/* Queues `p` behind the earlier requests of its sequence, checking its
 * correlation id and flags as Triton does: INVALID_ARG when it has no id,
 * when its batch size is not 1, when a string id meets an integer CORRID (or
 * the reverse), or when it is not START and its sequence is not active
 * ("must specify the START flag on the first request of the sequence").
 * UNAVAILABLE "Exceeds maximum queue size" when `cap` (0 = none) requests
 * are queued already (the server's overload cap; sequence_batching has no
 * queue policy of its own). On error `p` stays the caller's. */
enum pts_status pts_seq_push(struct pts_seq *q, struct pts_pending *p, uint64_t now_ns,
                             uint64_t cap, struct pts_error *err);

/* The next batch for instance `instance` at `now_ns`: returns how many
 * requests (one per sequence), linked through ->next into *out in row
 * order, or 0 with *wake_ns set to when to ask again (0 = when a request
 * arrives or a batch finishes). *rows gets the rows the batch spans: for
 * the direct strategy of a batching model, the instance's highest slot in
 * use + 1, each request's ->row its slot, and the caller fills the other
 * rows with padding (pendings with ->padding set); otherwise the count
 * returned, rows 0.. in list order. Releases idle sequences first. With
 * `flush` (shutting down) whatever is ready goes at once, and every
 * sequence with nothing queued or running is released (its slot may serve
 * a backlogged one). */
size_t pts_seq_choose(struct pts_seq *q, size_t instance, uint64_t now_ns, bool flush,
                      struct pts_pending **out, size_t *rows, uint64_t *wake_ns);

/* Requests queued now (not running). */
size_t pts_seq_queued(const struct pts_seq *q);

/* The tensor of extra input `k` (0-based among the execution config's
 * extra inputs: control inputs, then states) for the batch `items` (n
 * rows in that order, padding rows included): dtype, shape (batch dimension when the
 * model batches), data. *owned gets the new buffer (one reference, release
 * it after the backend ran); dst->buf points to it without its own. */
enum pts_status pts_seq_build_input(struct pts_seq *q, size_t k, struct pts_pending *const *items,
                                    size_t n, struct pts_tensor *dst, struct pts_buf **owned,
                                    struct pts_error *err);

/* After a successful batch: row i of each state output (`state_outputs`,
 * one per config state, in config order, batch dimension leading when the
 * model batches) becomes the state of items[i]'s sequence. */
enum pts_status pts_seq_keep_state(struct pts_seq *q, struct pts_pending *const *items, size_t n,
                                   const struct pts_tensor *state_outputs, struct pts_error *err);

/* The batch `list` (n requests linked through ->next, as choose gave them)
 * has run (or failed): their sequences may run their next requests; a
 * sequence whose END request ran is released. Call before the requests are
 * answered (which frees the pendings). */
void pts_seq_done(struct pts_seq *q, struct pts_pending *list, size_t n, uint64_t now_ns);

#endif
