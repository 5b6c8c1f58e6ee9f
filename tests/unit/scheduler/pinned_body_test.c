/* tests/unit/scheduler/pinned_body_test.c — request bodies in pinned memory
 * (core/pinned.h): with no allocator installed every buffer is ordinary;
 * once one is, buffers of PTS_PINNED_MIN_BYTES and more come from it,
 * marked pinned, and go back to it (with their context) on the last
 * release; smaller ones, and any the allocator can not serve, are
 * ordinary; the first allocator installed stays; PTSERVE_PINNED_BODIES_MAX
 * caps how many are pinned at once; pts_pinned_reserve fills the pool
 * (--pinned-memory-pool-byte-size) once, every block held until the last
 * is made. The request side:
 * pts_infer_request_note_pinned marks exactly the host inputs that lie in
 * a pinned buffer. A fake allocator stands in for LibTorch's, counting. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/pinned.h"
#include "scheduler/request.h"

static int allocs, releases, fail_next;
/* Blocks handed out and not yet back, the most at once, and allocations
 * left before every later one fails (-1: none fails). */
static int outstanding, most_outstanding, allocs_left;
static size_t last_n;
static void *last_ctx_seen;

static void *fake_alloc(size_t n, void **ctx) {
  if (fail_next || allocs_left == 0) {
    fail_next = 0;
    return NULL;
  }
  if (allocs_left > 0) allocs_left--;
  if (++outstanding > most_outstanding) most_outstanding = outstanding;
  allocs++;
  last_n = n;
  *ctx = &allocs; /* any pointer: checked on release */
  return pts_malloc(n);
}

static void fake_release(void *ctx, void *data) {
  outstanding--;
  releases++;
  last_ctx_seen = ctx;
  pts_free(data);
}

static const struct pts_pinned_allocator fake = {.alloc = fake_alloc, .release = fake_release};
static void *other_alloc(size_t n, void **ctx) {
  (void)n;
  (void)ctx;
  fail(); /* never installed: the first allocator stays */
  return NULL;
}
static const struct pts_pinned_allocator other = {.alloc = other_alloc, .release = fake_release};

static int reset(void **state) {
  (void)state;
  pts_pinned_reset_for_tests();
  allocs = releases = fail_next = 0;
  outstanding = most_outstanding = 0;
  allocs_left = -1;
  last_n = 0;
  last_ctx_seen = NULL;
  return 0;
}

static void ordinary_without_allocator(void **state) {
  (void)state;
  assert_false(pts_pinned_enabled());
  struct pts_buf *b = pts_buf_new_io(PTS_PINNED_MIN_BYTES * 4);
  assert_non_null(b);
  assert_false(b->pinned);
  assert_int_equal(b->size, PTS_PINNED_MIN_BYTES * 4);
  memset(b->data, 1, b->size);
  pts_buf_release(b);
  assert_int_equal(allocs, 0);
}

static void large_bodies_pinned(void **state) {
  (void)state;
  pts_pinned_install(&fake);
  pts_pinned_install(&other);
  assert_true(pts_pinned_enabled());
  struct pts_buf *b = pts_buf_new_io(PTS_PINNED_MIN_BYTES);
  assert_non_null(b);
  assert_true(b->pinned);
  assert_int_equal(allocs, 1);
  assert_int_equal(last_n, PTS_PINNED_MIN_BYTES);
  assert_int_equal(b->size, PTS_PINNED_MIN_BYTES);
  memset(b->data, 2, b->size);
  pts_buf_retain(b);
  pts_buf_release(b);
  assert_int_equal(releases, 0); /* a reference is left */
  pts_buf_release(b);
  assert_int_equal(releases, 1);
  assert_ptr_equal(last_ctx_seen, &allocs);
}

static void small_or_refused_stay_ordinary(void **state) {
  (void)state;
  pts_pinned_install(&fake);
  struct pts_buf *small = pts_buf_new_io(PTS_PINNED_MIN_BYTES - 1);
  assert_non_null(small);
  assert_false(small->pinned);
  pts_buf_release(small);
  fail_next = 1;
  struct pts_buf *refused = pts_buf_new_io(PTS_PINNED_MIN_BYTES * 2);
  assert_non_null(refused);
  assert_false(refused->pinned);
  pts_buf_release(refused);
  assert_int_equal(allocs, 0);
  assert_int_equal(releases, 0);
}

/* PTSERVE_PINNED_BODIES_MAX=2: two bodies pinned at once, a third
 * ordinary; once one goes back the next is pinned again. A body the
 * allocator refuses takes no place. 0: none pinned. */
static void cap_keeps_the_rest_ordinary(void **state) {
  (void)state;
  setenv("PTSERVE_PINNED_BODIES_MAX", "2", 1);
  pts_pinned_reset_for_tests();
  pts_pinned_install(&fake); /* reads the cap */
  struct pts_buf *a = pts_buf_new_io(PTS_PINNED_MIN_BYTES);
  fail_next = 1;
  struct pts_buf *refused = pts_buf_new_io(PTS_PINNED_MIN_BYTES);
  struct pts_buf *b = pts_buf_new_io(PTS_PINNED_MIN_BYTES);
  struct pts_buf *c = pts_buf_new_io(PTS_PINNED_MIN_BYTES);
  assert_true(a->pinned);
  assert_false(refused->pinned);
  assert_true(b->pinned);
  assert_false(c->pinned); /* the cap */
  assert_int_equal(allocs, 2);
  pts_buf_release(a);
  assert_int_equal(releases, 1);
  struct pts_buf *d = pts_buf_new_io(PTS_PINNED_MIN_BYTES);
  assert_true(d->pinned); /* a's place */
  pts_buf_release(b);
  pts_buf_release(c);
  pts_buf_release(d);
  pts_buf_release(refused);
  assert_int_equal(releases, 3);

  setenv("PTSERVE_PINNED_BODIES_MAX", "0", 1);
  pts_pinned_reset_for_tests();
  pts_pinned_install(&fake);
  struct pts_buf *e = pts_buf_new_io(PTS_PINNED_MIN_BYTES * 2);
  assert_false(e->pinned);
  pts_buf_release(e);
  assert_int_equal(allocs, 3);
  unsetenv("PTSERVE_PINNED_BODIES_MAX");
  pts_pinned_reset_for_tests();
}

/* Two inputs viewing one pinned body, one viewing an ordinary buffer, one
 * already in device memory (CUDA shared memory) and one with no data. */
static void request_inputs_marked(void **state) {
  (void)state;
  pts_pinned_install(&fake);
  struct pts_buf *body = pts_buf_new_io(PTS_PINNED_MIN_BYTES);
  struct pts_buf *plain = pts_buf_new(16);
  struct pts_infer_request *r = pts_infer_request_new();
  assert_non_null(body);
  assert_non_null(plain);
  assert_non_null(r);
  r->n_inputs = 5;
  r->inputs = pts_calloc(5, sizeof *r->inputs);
  assert_non_null(r->inputs);
  r->inputs[0].buf = pts_buf_retain(body);
  r->inputs[1].buf = pts_buf_retain(body);
  r->inputs[2].buf = pts_buf_retain(plain);
  r->inputs[3].buf = pts_buf_retain(body);
  r->inputs[3].mem = PTS_MEM_DEVICE;
  pts_infer_request_note_pinned(r);
  assert_int_equal(r->inputs[0].mem, PTS_MEM_PINNED);
  assert_int_equal(r->inputs[1].mem, PTS_MEM_PINNED);
  assert_int_equal(r->inputs[2].mem, PTS_MEM_HOST);
  assert_int_equal(r->inputs[3].mem, PTS_MEM_DEVICE);
  assert_int_equal(r->inputs[4].mem, PTS_MEM_HOST);
  pts_infer_request_free(r);
  pts_buf_release(plain);
  pts_buf_release(body);
  assert_int_equal(releases, 1);
}

/* Nothing is reserved without an allocator, without a pool, or for bodies
 * too small to be pinned. */
static void reserve_needs_allocator_pool_and_size(void **state) {
  (void)state;
  pts_pinned_set_pool(PTS_PINNED_MIN_BYTES * 8);
  assert_int_equal(pts_pinned_reserve(PTS_PINNED_MIN_BYTES), 0); /* no allocator */
  pts_pinned_install(&fake);
  assert_int_equal(pts_pinned_reserve(PTS_PINNED_MIN_BYTES - 1), 0); /* too small */
  pts_pinned_set_pool(0);
  assert_int_equal(pts_pinned_reserve(PTS_PINNED_MIN_BYTES), 0); /* no pool */
  assert_int_equal(allocs, 0);
}

/* A pool of 5.5 bodies: 5 made, all held at once, then all handed back;
 * the pool is then spent for that size, and what is left (half a body)
 * serves a smaller one. */
static void reserve_fills_the_pool_once(void **state) {
  (void)state;
  const size_t body = PTS_PINNED_MIN_BYTES * 2;
  pts_pinned_install(&fake);
  pts_pinned_set_pool(body * 5 + body / 2);
  assert_int_equal(pts_pinned_reserve(body), 5);
  assert_int_equal(allocs, 5);
  assert_int_equal(most_outstanding, 5);
  assert_int_equal(releases, 5);
  assert_int_equal(last_n, body);
  assert_int_equal(pts_pinned_reserve(body), 0);
  assert_int_equal(pts_pinned_reserve(PTS_PINNED_MIN_BYTES), 1);
  assert_int_equal(pts_pinned_reserve(PTS_PINNED_MIN_BYTES), 0);
  assert_int_equal(allocs, 6);
  assert_int_equal(releases, 6);
}

/* The allocator refuses the third of four: two are made, and the room of
 * the two not made goes back to the pool for the next model. */
static void reserve_refused_gives_the_rest_back(void **state) {
  (void)state;
  const size_t body = PTS_PINNED_MIN_BYTES;
  pts_pinned_install(&fake);
  pts_pinned_set_pool(body * 4);
  allocs_left = 2;
  assert_int_equal(pts_pinned_reserve(body), 2);
  assert_int_equal(releases, 2);
  allocs_left = -1;
  assert_int_equal(pts_pinned_reserve(body), 2);
  assert_int_equal(pts_pinned_reserve(body), 0);
  assert_int_equal(allocs, 4);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(ordinary_without_allocator, reset),
      cmocka_unit_test_setup(large_bodies_pinned, reset),
      cmocka_unit_test_setup(small_or_refused_stay_ordinary, reset),
      cmocka_unit_test_setup(cap_keeps_the_rest_ordinary, reset),
      cmocka_unit_test_setup(request_inputs_marked, reset),
      cmocka_unit_test_setup(reserve_needs_allocator_pool_and_size, reset),
      cmocka_unit_test_setup(reserve_fills_the_pool_once, reset),
      cmocka_unit_test_setup(reserve_refused_gives_the_rest_back, reset),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
