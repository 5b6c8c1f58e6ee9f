/* tests/unit/scheduler/queue_test.c — priority levels, queue policies and
 * the batcher's choice (queue.h), against Triton's documented rules
 * (triton-anchor §2.7, protocol-facts §1.16): level 1 first, priority 0 or
 * out of range → default level, max_queue_size → "Exceeds maximum queue
 * size", a request timeout may only shorten the policy's, REJECT drops and
 * DELAY demotes, preferred sizes and max_queue_delay. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "config/model_config.h"
#include "core/alloc.h"
#include "scheduler/queue.h"

static Inference__ModelConfig *parse(const char *text) {
  Inference__ModelConfig *cfg = NULL;
  struct pts_error err;
  assert_int_equal(pts_model_config_parse(text, strlen(text), "test", &cfg, &err), PTS_OK);
  return cfg;
}

struct fixture {
  Inference__ModelConfig *cfg;
  struct pts_sched_queue q;
  struct pts_pending items[16];
};

static void setup(struct fixture *f, const char *text) {
  memset(f, 0, sizeof *f);
  f->cfg = parse(text);
  struct pts_error err;
  assert_int_equal(pts_sched_queue_init(&f->q, f->cfg, &err), PTS_OK);
  for (int i = 0; i < 16; i++) {
    f->items[i].batch_size = 1;
    f->items[i].seq = (uint64_t)i;
  }
}

static void teardown(struct fixture *f) {
  /* The items are on the stack: empty the lists before freeing. */
  while (pts_sched_queue_take(&f->q, 16)) {
  }
  pts_sched_queue_free(&f->q);
  pts_model_config_free(f->cfg);
}

static enum pts_status push(struct fixture *f, int i, uint64_t priority, uint64_t timeout_us,
                            uint64_t now) {
  struct pts_error err;
  f->items[i].enqueue_ns = now;
  return pts_sched_queue_push(&f->q, &f->items[i], priority, timeout_us, now, 0, &err);
}

/* The item indices in dispatch order, as a string "3,0,1". */
static void order(struct fixture *f, char *out, size_t size) {
  out[0] = '\0';
  size_t used = 0;
  for (struct pts_pending *p = pts_sched_queue_first(&f->q); p; p = pts_sched_queue_next(&f->q, p))
    used += (size_t)snprintf(out + used, size - used, "%s%d", used ? "," : "", (int)(p - f->items));
}

static void priorities_and_default_level(void **state) {
  (void)state;
  struct fixture f;
  setup(&f, "max_batch_size: 8 dynamic_batching { priority_levels: 3 default_priority_level: 2 }");
  assert_int_equal(f.q.n_levels, 3);
  assert_int_equal(push(&f, 0, 3, 0, 1), PTS_OK);  /* low */
  assert_int_equal(push(&f, 1, 0, 0, 2), PTS_OK);  /* default → 2 */
  assert_int_equal(push(&f, 2, 1, 0, 3), PTS_OK);  /* high */
  assert_int_equal(push(&f, 3, 99, 0, 4), PTS_OK); /* out of range → 2 */
  assert_int_equal(push(&f, 4, 1, 0, 5), PTS_OK);
  char got[64];
  order(&f, got, sizeof got);
  assert_string_equal(got, "2,4,1,3,0");
  assert_int_equal(f.q.size, 5);
  struct pts_pending *head = pts_sched_queue_take(&f.q, 2);
  assert_ptr_equal(head, &f.items[2]);
  assert_ptr_equal(head->next, &f.items[4]);
  assert_null(head->next->next);
  assert_int_equal(f.q.size, 3);
  order(&f, got, sizeof got);
  assert_string_equal(got, "1,3,0");
  teardown(&f);
}

static void max_queue_size_per_level(void **state) {
  (void)state;
  struct fixture f;
  setup(&f,
        "max_batch_size: 8 dynamic_batching { priority_levels: 2 default_priority_level: 2 "
        "default_queue_policy { max_queue_size: 2 } "
        "priority_queue_policy { key: 1 value: { max_queue_size: 1 } } }");
  struct pts_error err;
  assert_int_equal(push(&f, 0, 1, 0, 1), PTS_OK);
  f.items[1].enqueue_ns = 2;
  assert_int_equal(pts_sched_queue_push(&f.q, &f.items[1], 1, 0, 2, 0, &err), PTS_UNAVAILABLE);
  assert_string_equal(err.msg,
                      "Exceeds maximum queue size: priority level 1 is full at 1 "
                      "(max_queue_size)");
  assert_int_equal(push(&f, 2, 2, 0, 3), PTS_OK);
  assert_int_equal(push(&f, 3, 0, 0, 4), PTS_OK);
  assert_int_equal(push(&f, 4, 2, 0, 5), PTS_UNAVAILABLE);
  assert_int_equal(f.q.size, 3);
  teardown(&f);
}

/* The default cap binds only levels whose policy sets no max_queue_size. */
static void default_cap_without_a_policy_limit(void **state) {
  (void)state;
  struct fixture f;
  setup(&f,
        "max_batch_size: 8 dynamic_batching { priority_levels: 2 "
        "priority_queue_policy { key: 1 value: { max_queue_size: 3 } } }");
  struct pts_error err;
  /* Level 2 (no max_queue_size): two fit under a cap of 2, the third not. */
  for (int i = 0; i < 2; i++)
    assert_int_equal(pts_sched_queue_push(&f.q, &f.items[i], 2, 0, 1, 2, &err), PTS_OK);
  assert_int_equal(pts_sched_queue_push(&f.q, &f.items[2], 2, 0, 1, 2, &err), PTS_UNAVAILABLE);
  assert_string_equal(err.msg,
                      "Exceeds maximum queue size: priority level 2 is full at 2 "
                      "(--default-max-queue-size, as the config sets no max_queue_size)");
  /* Level 1 keeps its own limit of 3, above the cap. */
  for (int i = 2; i < 5; i++)
    assert_int_equal(pts_sched_queue_push(&f.q, &f.items[i], 1, 0, 1, 2, &err), PTS_OK);
  assert_int_equal(pts_sched_queue_push(&f.q, &f.items[5], 1, 0, 1, 2, &err), PTS_UNAVAILABLE);
  /* A cap of 0 is no cap. */
  assert_int_equal(pts_sched_queue_push(&f.q, &f.items[5], 2, 0, 1, 0, &err), PTS_OK);
  assert_int_equal(f.q.size, 6);
  teardown(&f);
}

static void timeouts_reject_and_override(void **state) {
  (void)state;
  struct fixture f;
  setup(&f,
        "max_batch_size: 8 dynamic_batching { default_queue_policy { "
        "default_timeout_microseconds: 1000 allow_timeout_override: true } }");
  const uint64_t ms = 1000000;
  assert_int_equal(push(&f, 0, 0, 0, 0), PTS_OK);    /* policy: 1 ms */
  assert_int_equal(push(&f, 1, 0, 500, 0), PTS_OK);  /* shortened: 0.5 ms */
  assert_int_equal(push(&f, 2, 0, 5000, 0), PTS_OK); /* may not extend: 1 ms */
  assert_int_equal(f.items[0].deadline_ns, ms);
  assert_int_equal(f.items[1].deadline_ns, ms / 2);
  assert_int_equal(f.items[2].deadline_ns, ms);
  struct pts_pending *rej = NULL;
  assert_int_equal(pts_sched_queue_expire(&f.q, ms / 2, &rej), ms);
  assert_ptr_equal(rej, &f.items[1]);
  assert_null(rej->next);
  assert_int_equal(pts_sched_queue_expire(&f.q, ms, &rej), 0);
  assert_ptr_equal(rej, &f.items[0]);
  assert_ptr_equal(rej->next, &f.items[2]);
  assert_int_equal(f.q.size, 0);
  teardown(&f);

  /* A timeout beyond the clock's range is no timeout, not a wrapped one. */
  setup(&f,
        "max_batch_size: 8 dynamic_batching { default_queue_policy { "
        "allow_timeout_override: true } }");
  assert_int_equal(push(&f, 0, 0, UINT64_MAX, 5), PTS_OK);
  assert_int_equal(f.items[0].deadline_ns, 0);
  teardown(&f);

  /* Without allow_timeout_override the request's timeout is ignored. */
  setup(&f, "max_batch_size: 8 dynamic_batching { }");
  assert_int_equal(push(&f, 0, 0, 10, 0), PTS_OK);
  assert_int_equal(f.items[0].deadline_ns, 0);
  teardown(&f);
}

static void timeouts_delay(void **state) {
  (void)state;
  struct fixture f;
  setup(&f,
        "max_batch_size: 8 dynamic_batching { priority_levels: 2 default_priority_level: 1 "
        "default_queue_policy { timeout_action: DELAY allow_timeout_override: true } }");
  assert_int_equal(push(&f, 0, 1, 100, 0), PTS_OK); /* expires at 100 µs */
  assert_int_equal(push(&f, 1, 1, 0, 1), PTS_OK);
  assert_int_equal(push(&f, 2, 2, 0, 2), PTS_OK);
  struct pts_pending *rej = NULL;
  assert_int_equal(pts_sched_queue_expire(&f.q, 200000, &rej), 0);
  assert_null(rej);
  /* The delayed request follows the rest of its level, still before level 2. */
  char got[64];
  order(&f, got, sizeof got);
  assert_string_equal(got, "1,0,2");
  assert_true(f.items[0].delayed);
  assert_int_equal(f.q.size, 3);
  teardown(&f);
}

static bool same_parity(const struct pts_pending *first, const struct pts_pending *p, void *ctx) {
  (void)ctx;
  return (first->seq & 1) == (p->seq & 1);
}

static size_t choose(struct fixture *f, const int32_t *pref, size_t n_pref, uint64_t delay_ns,
                     uint64_t now, uint64_t *wake) {
  struct pts_batch_limits lim = {.dynamic = true,
                                 .max_batch_size = 8,
                                 .preferred = pref,
                                 .n_preferred = n_pref,
                                 .max_delay_ns = delay_ns};
  return pts_sched_queue_choose(&f->q, &lim, now, false, NULL, NULL, wake);
}

static void batcher_choice(void **state) {
  (void)state;
  struct fixture f;
  uint64_t wake;
  const int32_t p24[] = {2, 4}, p8[] = {8};
  setup(&f, "max_batch_size: 8 dynamic_batching { }");
  assert_int_equal(choose(&f, p24, 2, 0, 0, &wake), 0); /* empty */
  for (int i = 0; i < 6; i++) assert_int_equal(push(&f, i, 0, 0, 100 + (uint64_t)i), PTS_OK);
  /* The walk stops at the largest preferred size. */
  assert_int_equal(choose(&f, p24, 2, 0, 1000, &wake), 4);
  pts_sched_queue_take(&f.q, 4);
  /* 2 left, preferred 2 reached: at once, even with a queue delay. */
  assert_int_equal(choose(&f, p24, 2, 1000000, 1000, &wake), 2);
  pts_sched_queue_take(&f.q, 2);
  /* 3 queued, preferred 8 out of reach: wait until the oldest has waited
   * the delay, then take all. */
  for (int i = 6; i < 9; i++) assert_int_equal(push(&f, i, 0, 0, 5000 + (uint64_t)i), PTS_OK);
  assert_int_equal(choose(&f, p8, 1, 10000, 6000, &wake), 0);
  assert_int_equal(wake, 5006 + 10000);
  assert_int_equal(choose(&f, p8, 1, 10000, 15006, &wake), 3);
  /* No delay: everything at once. */
  assert_int_equal(choose(&f, p8, 1, 0, 6000, &wake), 3);
  /* Shutting down flushes. */
  struct pts_batch_limits lim = {.dynamic = true,
                                 .max_batch_size = 8,
                                 .preferred = p8,
                                 .n_preferred = 1,
                                 .max_delay_ns = 10000};
  assert_int_equal(pts_sched_queue_choose(&f.q, &lim, 6000, true, NULL, NULL, &wake), 3);
  /* Without dynamic batching a batch is one request. */
  lim.dynamic = false;
  assert_int_equal(pts_sched_queue_choose(&f.q, &lim, 6000, false, NULL, NULL, &wake), 1);
  teardown(&f);

  /* Requests that do not fit stop the walk: batch sizes 3,3,3 with max 8. */
  setup(&f, "max_batch_size: 8 dynamic_batching { }");
  for (int i = 0; i < 3; i++) {
    f.items[i].batch_size = 3;
    assert_int_equal(push(&f, i, 0, 0, 1), PTS_OK);
  }
  assert_int_equal(choose(&f, p8, 1, 1000000, 2, &wake), 2);
  teardown(&f);

  /* An incompatible request stops the walk too (seq parity stands in for
   * the shape check): 0, 2 may go together, 1 may not join them. */
  setup(&f, "max_batch_size: 8 dynamic_batching { }");
  for (int i = 0; i < 3; i++) assert_int_equal(push(&f, i, 0, 0, 1), PTS_OK);
  struct pts_batch_limits l2 = {
      .dynamic = true, .max_batch_size = 8, .preferred = p8, .n_preferred = 1};
  assert_int_equal(pts_sched_queue_choose(&f.q, &l2, 2, false, same_parity, NULL, &wake), 1);
  teardown(&f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(priorities_and_default_level),
      cmocka_unit_test(max_queue_size_per_level),
      cmocka_unit_test(default_cap_without_a_policy_limit),
      cmocka_unit_test(timeouts_reject_and_override),
      cmocka_unit_test(timeouts_delay),
      cmocka_unit_test(batcher_choice),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
