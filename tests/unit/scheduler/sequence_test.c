/* tests/unit/scheduler/sequence_test.c — the sequence batcher (sequence.h)
 * with hand-made requests and a hand-driven clock: Triton's id and flag
 * rules and messages, direct slots and their backlog, oldest candidates and
 * preferred sizes, idle release, and the control and state tensors a batch
 * gets (values written here from the config's false/true lists). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "config/model_config.h"
#include "core/alloc.h"
#include "scheduler/request.h"
#include "scheduler/sequence.h"

#define MS 1000000ull

struct fixture {
  Inference__ModelConfig *cfg;
  struct pts_seq *q;
  struct pts_infer_request reqs[16];
  struct pts_pending items[16];
  uint64_t cap; /* pts_seq_push's */
  size_t rows;  /* the last choose's */
};

static void setup(struct fixture *f, const char *text, size_t n_instances) {
  memset(f, 0, sizeof *f);
  struct pts_error err;
  assert_int_equal(pts_model_config_parse(text, strlen(text), "test", &f->cfg, &err), PTS_OK);
  assert_int_equal(pts_model_config_complete(f->cfg, ".", "m", &err), PTS_OK);
  assert_int_equal(pts_seq_create(f->cfg, "m", ".", n_instances, &f->q, &err), PTS_OK);
  for (int i = 0; i < 16; i++) {
    f->items[i].req = &f->reqs[i];
    f->items[i].batch_size = 1;
  }
}

static void teardown(struct fixture *f) {
  pts_seq_destroy(f->q);
  pts_model_config_free(f->cfg);
}

/* Queues request i for sequence `id` at `now`. */
static enum pts_status push(struct fixture *f, int i, uint64_t id, bool start, bool end,
                            uint64_t now, struct pts_error *err) {
  f->reqs[i].sequence_id = id;
  f->reqs[i].sequence_start = start;
  f->reqs[i].sequence_end = end;
  f->items[i].enqueue_ns = now;
  return pts_seq_push(f->q, &f->items[i], now, f->cap, err);
}

static void push_ok(struct fixture *f, int i, uint64_t id, bool start, bool end, uint64_t now) {
  struct pts_error err;
  assert_int_equal(push(f, i, id, start, end, now, &err), PTS_OK);
}

/* The batch as indexes into items, -1 terminated. */
static size_t choose(struct fixture *f, size_t inst, uint64_t now, int *idx, uint64_t *wake,
                     struct pts_pending **list) {
  uint64_t w = 0;
  size_t n = pts_seq_choose(f->q, inst, now, false, list, &f->rows, &w);
  size_t k = 0;
  for (struct pts_pending *p = *list; p; p = p->next) idx[k++] = (int)(p - f->items);
  assert_int_equal(k, n);
  idx[k] = -1;
  if (wake) *wake = w;
  return n;
}

static const char *DIRECT =
    "backend: 'identity' max_batch_size: 2 input { name: 'x' data_type: TYPE_FP32 dims: [ 1 ] }"
    " sequence_batching { max_sequence_idle_microseconds: 5000"
    " control_input { name: 'S' control { kind: CONTROL_SEQUENCE_START int32_false_true: [ 7, 9 "
    "] } }"
    " control_input { name: 'E' control { kind: CONTROL_SEQUENCE_END fp32_false_true: [ 0.5, 1.5 "
    "] } }"
    " control_input { name: 'R' control { kind: CONTROL_SEQUENCE_READY bool_false_true: [ false, "
    "true ] } }"
    " control_input { name: 'C' control { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT32 } "
    "}"
    " state { input_name: 'si' output_name: 'so' data_type: TYPE_INT32 dims: [ 2 ] } }";

static void ids_and_flags_as_triton(void **state) {
  (void)state;
  struct fixture f;
  setup(&f, DIRECT, 1);
  struct pts_error err;
  assert_int_equal(push(&f, 0, 0, true, false, 0, &err), PTS_INVALID_ARG);
  assert_string_equal(err.msg,
                      "inference request to model 'm' must specify a non-zero or non-empty "
                      "correlation ID");
  assert_int_equal(push(&f, 0, 1234, false, false, 0, &err), PTS_INVALID_ARG);
  assert_string_equal(err.msg,
                      "inference request for sequence 1234 to model 'm' must specify the START "
                      "flag on the first request of the sequence");
  assert_int_equal(push(&f, 0, 1234, false, true, 0, &err), PTS_INVALID_ARG); /* END alone */
  f.items[1].batch_size = 2;
  assert_int_equal(push(&f, 1, 5, true, false, 0, &err), PTS_INVALID_ARG);
  assert_non_null(strstr(err.msg, "must have batch size 1, got 2"));
  f.reqs[2].sequence_id_str = "abc"; /* an integer CORRID takes no string id */
  assert_int_equal(push(&f, 2, 0, true, false, 0, &err), PTS_INVALID_ARG);
  assert_non_null(strstr(err.msg, "takes integer correlation IDs"));
  f.reqs[2].sequence_id_str = NULL;
  /* After END, only a START begins the id again. */
  push_ok(&f, 3, 8, true, true, 0);
  assert_int_equal(push(&f, 4, 8, false, false, 0, &err), PTS_INVALID_ARG);
  assert_int_equal(pts_seq_queued(f.q), 1);
  int idx[17];
  struct pts_pending *list;
  assert_int_equal(choose(&f, 0, 0, idx, NULL, &list), 1);
  pts_seq_done(f.q, list, 1, 0);
  teardown(&f);
}

/* direct: two instances × 2 slots; a fifth sequence waits for a slot; a
 * sequence's next request waits for its running one; an instance batches
 * only its own slots. */
static void direct_slots_and_backlog(void **state) {
  (void)state;
  struct fixture f;
  setup(&f, DIRECT, 2);
  for (int i = 0; i < 5; i++) push_ok(&f, i, 100 + (uint64_t)i, true, false, 0);
  push_ok(&f, 5, 100, false, true, 0); /* sequence 100's second request */
  int a[17], b[17];
  struct pts_pending *la, *lb, *l;
  /* Least-loaded placement: 100 → inst 0, 101 → inst 1, 102 → 0, 103 → 1. */
  assert_int_equal(choose(&f, 0, 0, a, NULL, &la), 2);
  assert_int_equal(a[0], 0);
  assert_int_equal(a[1], 2);
  assert_int_equal(choose(&f, 1, 0, b, NULL, &lb), 2);
  assert_int_equal(b[0], 1);
  assert_int_equal(b[1], 3);
  /* 100's END waits for its START to finish; 104 has no slot. */
  assert_int_equal(choose(&f, 0, 0, a, NULL, &l), 0);
  pts_seq_done(f.q, la, 2, 1);
  assert_int_equal(choose(&f, 0, 1, a, NULL, &la), 1);
  assert_int_equal(a[0], 5);
  pts_seq_done(f.q, la, 1, 2); /* 100 ended: its slot goes to 104 */
  assert_int_equal(choose(&f, 0, 2, a, NULL, &la), 1);
  assert_int_equal(a[0], 4);
  pts_seq_done(f.q, la, 1, 3);
  pts_seq_done(f.q, lb, 2, 3);
  teardown(&f);
}

/* A sequence idle for max_sequence_idle is released: choose reports when,
 * and a request after it needs START again. */
static void idle_release(void **state) {
  (void)state;
  struct fixture f;
  setup(&f, DIRECT, 1);
  push_ok(&f, 0, 42, true, false, 0);
  int a[17];
  struct pts_pending *l;
  uint64_t wake;
  assert_int_equal(choose(&f, 0, 0, a, NULL, &l), 1);
  pts_seq_done(f.q, l, 1, 1 * MS);
  assert_int_equal(choose(&f, 0, 2 * MS, a, &wake, &l), 0);
  assert_int_equal(wake, 6 * MS); /* 1 ms + 5 ms idle */
  push_ok(&f, 1, 42, false, false, 5 * MS); /* still alive */
  assert_int_equal(choose(&f, 0, 5 * MS, a, NULL, &l), 1);
  pts_seq_done(f.q, l, 1, 5 * MS);
  struct pts_error err;
  assert_int_equal(push(&f, 2, 42, false, false, 10 * MS + 1, &err), PTS_INVALID_ARG);
  assert_non_null(strstr(err.msg, "must specify the START flag"));
  teardown(&f);
}

/* Control values from the false/true lists, READY true, CORRID the id; the
 * state starts at zeros and follows the state output; START resets it. */
static void control_and_state_tensors(void **state) {
  (void)state;
  struct fixture f;
  setup(&f, DIRECT, 1);
  push_ok(&f, 0, 11, true, false, 0);
  push_ok(&f, 1, 12, true, true, 0);
  int a[17];
  struct pts_pending *l;
  assert_int_equal(choose(&f, 0, 0, a, NULL, &l), 2);
  struct pts_pending *items[2] = {l, l->next};
  struct pts_error err;
  struct pts_tensor t;
  struct pts_buf *owned;
  memset(&t, 0, sizeof t);
  assert_int_equal(pts_seq_build_input(f.q, 0, items, 2, &t, &owned, &err), PTS_OK);
  assert_int_equal(t.dtype, PTS_DTYPE_INT32);
  assert_int_equal(t.shape.ndim, 2);
  assert_int_equal(t.shape.dims[0], 2);
  assert_int_equal(((const int32_t *)t.data)[0], 9); /* START: true, true */
  assert_int_equal(((const int32_t *)t.data)[1], 9);
  pts_buf_release(owned);
  assert_int_equal(pts_seq_build_input(f.q, 1, items, 2, &t, &owned, &err), PTS_OK);
  assert_true(((const float *)t.data)[0] == 0.5f); /* END: false, true */
  assert_true(((const float *)t.data)[1] == 1.5f);
  pts_buf_release(owned);
  assert_int_equal(pts_seq_build_input(f.q, 2, items, 2, &t, &owned, &err), PTS_OK);
  assert_int_equal(t.dtype, PTS_DTYPE_BOOL);
  assert_int_equal(((const uint8_t *)t.data)[0], 1);
  pts_buf_release(owned);
  assert_int_equal(pts_seq_build_input(f.q, 3, items, 2, &t, &owned, &err), PTS_OK);
  assert_int_equal(t.dtype, PTS_DTYPE_UINT32);
  assert_int_equal(((const uint32_t *)t.data)[0], 11);
  assert_int_equal(((const uint32_t *)t.data)[1], 12);
  pts_buf_release(owned);
  assert_int_equal(pts_seq_build_input(f.q, 4, items, 2, &t, &owned, &err), PTS_OK);
  assert_int_equal(t.shape.ndim, 2);
  assert_int_equal(t.shape.dims[1], 2);
  const int32_t zeros[4] = {0, 0, 0, 0};
  assert_memory_equal(t.data, zeros, sizeof zeros);
  pts_buf_release(owned);
  /* The model's new state: row 0 → sequence 11, row 1 → sequence 12. */
  int32_t out[4] = {1, 2, 3, 4};
  struct pts_tensor so = {.dtype = PTS_DTYPE_INT32, .data = out, .byte_size = sizeof out,
                          .shape = {.ndim = 2, .dims = {2, 2}}};
  assert_int_equal(pts_seq_keep_state(f.q, items, 2, &so, &err), PTS_OK);
  so.byte_size = 8; /* a wrong size is the model's fault */
  assert_int_equal(pts_seq_keep_state(f.q, items, 2, &so, &err), PTS_INTERNAL);
  pts_seq_done(f.q, l, 2, 0);
  push_ok(&f, 2, 11, false, false, 0);
  push_ok(&f, 3, 13, true, false, 0);
  assert_int_equal(choose(&f, 0, 0, a, NULL, &l), 2);
  items[0] = l;
  items[1] = l->next;
  assert_int_equal(pts_seq_build_input(f.q, 4, items, 2, &t, &owned, &err), PTS_OK);
  const int32_t want[4] = {1, 2, 0, 0}; /* 11 kept its state, 13 starts at zeros */
  assert_memory_equal(t.data, want, sizeof want);
  pts_buf_release(owned);
  pts_seq_done(f.q, l, 2, 0);
  teardown(&f);
}

/* direct with batching: a batch spans every slot up to the highest in use,
 * each request at its slot's row; the scheduler's padding rows (no
 * sequence) get READY false, CORRID 0 and the initial state, and keep
 * no state. */
static void direct_rows_and_padding(void **state) {
  (void)state;
  struct fixture f;
  setup(&f, DIRECT, 1);
  push_ok(&f, 0, 21, true, false, 0); /* slot 0 */
  push_ok(&f, 1, 22, true, false, 0); /* slot 1 */
  int a[17];
  struct pts_pending *l;
  assert_int_equal(choose(&f, 0, 0, a, NULL, &l), 2);
  assert_int_equal(f.rows, 2);
  assert_int_equal(l->row, 0);
  assert_int_equal(l->next->row, 1);
  pts_seq_done(f.q, l, 2, 0);
  /* Only 22 has a request: one request, two rows, at row 1. */
  push_ok(&f, 2, 22, false, false, 0);
  assert_int_equal(choose(&f, 0, 0, a, NULL, &l), 1);
  assert_int_equal(a[0], 2);
  assert_int_equal(f.rows, 2);
  assert_int_equal(l->row, 1);
  struct pts_pending pad = {.padding = true, .batch_size = 1};
  struct pts_infer_request pad_req;
  memset(&pad_req, 0, sizeof pad_req);
  pad.req = &pad_req;
  struct pts_pending *items[2] = {&pad, l};
  struct pts_error err;
  struct pts_tensor t;
  struct pts_buf *owned;
  memset(&t, 0, sizeof t);
  assert_int_equal(pts_seq_build_input(f.q, 2, items, 2, &t, &owned, &err), PTS_OK);
  assert_int_equal(((const uint8_t *)t.data)[0], 0); /* READY: false, true */
  assert_int_equal(((const uint8_t *)t.data)[1], 1);
  pts_buf_release(owned);
  assert_int_equal(pts_seq_build_input(f.q, 0, items, 2, &t, &owned, &err), PTS_OK);
  assert_int_equal(((const int32_t *)t.data)[0], 7); /* START false on both */
  assert_int_equal(((const int32_t *)t.data)[1], 7);
  pts_buf_release(owned);
  assert_int_equal(pts_seq_build_input(f.q, 3, items, 2, &t, &owned, &err), PTS_OK);
  assert_int_equal(((const uint32_t *)t.data)[0], 0);
  assert_int_equal(((const uint32_t *)t.data)[1], 22);
  pts_buf_release(owned);
  /* State: 22 had none kept yet, the padding row gets the initial one. */
  int32_t out[4] = {5, 6, 7, 8};
  struct pts_tensor so = {.dtype = PTS_DTYPE_INT32, .data = out, .byte_size = sizeof out,
                          .shape = {.ndim = 2, .dims = {2, 2}}};
  assert_int_equal(pts_seq_keep_state(f.q, items, 2, &so, &err), PTS_OK);
  pts_seq_done(f.q, items[0], 1, 0); /* a padding row is no sequence's */
  pts_seq_done(f.q, l, 1, 0);
  /* Both again: 21 at row 0 with its own state (the padding row's output
   * went nowhere), 22 at row 1 with row 1 of that output. */
  push_ok(&f, 3, 21, false, false, 0);
  push_ok(&f, 4, 22, false, true, 0);
  assert_int_equal(choose(&f, 0, 0, a, NULL, &l), 2);
  items[0] = l;
  items[1] = l->next;
  assert_int_equal(pts_seq_build_input(f.q, 4, items, 2, &t, &owned, &err), PTS_OK);
  const int32_t want[4] = {0, 0, 7, 8}; /* 21: initial; 22: row 1 of the last output */
  assert_memory_equal(t.data, want, sizeof want);
  pts_buf_release(owned);
  pts_seq_done(f.q, l, 2, 0); /* 22 ended: slot 1 is free */
  push_ok(&f, 5, 21, false, false, 0);
  assert_int_equal(choose(&f, 0, 0, a, NULL, &l), 1);
  assert_int_equal(f.rows, 1);
  pts_seq_done(f.q, l, 1, 0);
  teardown(&f);
}

static const char *OLDEST =
    "backend: 'identity' max_batch_size: 4 sequence_batching { oldest { max_candidate_sequences: "
    "3 preferred_batch_size: [ 2 ] max_queue_delay_microseconds: 1000 } }";

/* oldest: 3 candidates (a fourth sequence waits), oldest request first,
 * a preferred size goes at once, anything else waits the queue delay. */
static void oldest_candidates_and_delay(void **state) {
  (void)state;
  struct fixture f;
  setup(&f, OLDEST, 2);
  push_ok(&f, 0, 1, true, false, 30);
  int a[17];
  struct pts_pending *l;
  uint64_t wake;
  assert_int_equal(choose(&f, 1, 40, a, &wake, &l), 0);
  assert_int_equal(wake, 30 + 1000000); /* one request: waits the delay */
  push_ok(&f, 1, 2, true, false, 20);
  push_ok(&f, 2, 3, true, false, 10);
  push_ok(&f, 3, 4, true, true, 5); /* no candidacy left */
  assert_int_equal(choose(&f, 0, 50, a, NULL, &l), 2); /* preferred 2, oldest first */
  assert_int_equal(a[0], 2);
  assert_int_equal(a[1], 1);
  struct pts_pending *first = l;
  assert_int_equal(choose(&f, 1, 60, a, NULL, &l), 0);
  assert_int_equal(choose(&f, 1, 30 + 1000000, a, NULL, &l), 1); /* delay over */
  assert_int_equal(a[0], 0);
  pts_seq_done(f.q, l, 1, 0);
  pts_seq_done(f.q, first, 2, 0);
  /* Sequence 4 becomes a candidate only when one ends. */
  push_ok(&f, 4, 3, false, true, 2000000);
  assert_int_equal(choose(&f, 0, 3000000, a, NULL, &l), 1);
  assert_int_equal(a[0], 4);
  pts_seq_done(f.q, l, 1, 3000000);
  assert_int_equal(choose(&f, 0, 5000000, a, NULL, &l), 1);
  assert_int_equal(a[0], 3);
  pts_seq_done(f.q, l, 1, 5000000);
  teardown(&f);
}

/* The queue cap counts queued requests of every sequence. */
static void queue_cap(void **state) {
  (void)state;
  struct fixture f;
  setup(&f, DIRECT, 1);
  f.cap = 2;
  push_ok(&f, 0, 1, true, false, 0);
  push_ok(&f, 1, 2, true, false, 0);
  struct pts_error err;
  assert_int_equal(push(&f, 2, 3, true, false, 0, &err), PTS_UNAVAILABLE);
  assert_non_null(strstr(err.msg, "Exceeds maximum queue size"));
  int a[17];
  struct pts_pending *l;
  assert_int_equal(choose(&f, 0, 0, a, NULL, &l), 2);
  push_ok(&f, 2, 3, true, false, 0); /* running ones do not count */
  pts_seq_done(f.q, l, 2, 0);
  teardown(&f);
}

/* A CORRID of TYPE_STRING: each row one BYTES element holding the id. */
static void string_corrid(void **state) {
  (void)state;
  struct fixture f;
  setup(&f,
        "backend: 'identity' max_batch_size: 2 sequence_batching { control_input { name: 'C' "
        "control { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_STRING } } }",
        1);
  struct pts_error err;
  assert_int_equal(push(&f, 0, 5, true, false, 0, &err), PTS_INVALID_ARG); /* integer id */
  assert_non_null(strstr(err.msg, "takes string correlation IDs"));
  f.reqs[0].sequence_id_str = "ab";
  f.reqs[1].sequence_id_str = "xyz";
  push_ok(&f, 0, 0, true, false, 0);
  push_ok(&f, 1, 0, true, false, 0);
  int a[17];
  struct pts_pending *l;
  assert_int_equal(choose(&f, 0, 0, a, NULL, &l), 2);
  struct pts_pending *items[2] = {l, l->next};
  struct pts_tensor t;
  struct pts_buf *owned;
  memset(&t, 0, sizeof t);
  assert_int_equal(pts_seq_build_input(f.q, 0, items, 2, &t, &owned, &err), PTS_OK);
  assert_int_equal(t.dtype, PTS_DTYPE_BYTES);
  static const unsigned char want[] = {2, 0, 0, 0, 'a', 'b', 3, 0, 0, 0, 'x', 'y', 'z'};
  assert_int_equal(t.byte_size, sizeof want);
  assert_memory_equal(t.data, want, sizeof want);
  pts_buf_release(owned);
  pts_seq_done(f.q, l, 2, 0);
  teardown(&f);
}

/* direct.max_queue_delay: an instance waits for its other active slots, up
 * to the delay from its oldest ready request. */
static void direct_delay(void **state) {
  (void)state;
  struct fixture f;
  setup(&f,
        "backend: 'identity' max_batch_size: 2 sequence_batching { direct { "
        "max_queue_delay_microseconds: 100 } }",
        1);
  push_ok(&f, 0, 1, true, false, 0);
  push_ok(&f, 1, 2, true, false, 0);
  int a[17];
  struct pts_pending *l;
  uint64_t wake;
  assert_int_equal(choose(&f, 0, 0, a, NULL, &l), 2); /* both slots ready: at once */
  pts_seq_done(f.q, l, 2, 10);
  push_ok(&f, 2, 1, false, false, 20);
  assert_int_equal(choose(&f, 0, 30, a, &wake, &l), 0); /* sequence 2 may still come */
  assert_int_equal(wake, 20 + 100000);
  assert_int_equal(choose(&f, 0, 20 + 100000, a, NULL, &l), 1);
  pts_seq_done(f.q, l, 1, 0);
  teardown(&f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(ids_and_flags_as_triton),
      cmocka_unit_test(direct_slots_and_backlog),
      cmocka_unit_test(idle_release),
      cmocka_unit_test(control_and_state_tensors),
      cmocka_unit_test(oldest_candidates_and_delay),
      cmocka_unit_test(queue_cap),
      cmocka_unit_test(string_corrid),
      cmocka_unit_test(direct_delay),
      cmocka_unit_test(direct_rows_and_padding),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
