/* tests/unit/cache/cache_test.c — the response cache: what a key is made
 * of, hits that return a copy of what was stored, least-recently-used
 * eviction within the byte size, the refusals, and --cache-config. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "cache/cache.h"
#include "core/alloc.h"

/* A host tensor over borrowed bytes (buf NULL: no reference to manage). */
static struct pts_tensor tensor(const char *name, enum pts_dtype dt, const void *data, size_t n,
                                int ndim, const int64_t *dims) {
  struct pts_tensor t = {0};
  t.name = (char *)name;
  t.dtype = dt;
  t.data = data;
  t.byte_size = n;
  t.shape.ndim = ndim;
  for (int i = 0; i < ndim; i++) t.shape.dims[i] = dims[i];
  return t;
}

static struct pts_cache_key key_of(uint64_t gen, const struct pts_tensor *in, size_t n) {
  struct pts_cache_key k;
  struct pts_error err;
  assert_int_equal(pts_cache_key_make(gen, "m", 1, in, n, &k, &err), PTS_OK);
  return k;
}

static bool same_key(const struct pts_cache_key *a, const struct pts_cache_key *b) {
  return a->hash == b->hash && a->len == b->len && memcmp(a->bytes, b->bytes, a->len) == 0;
}

static void a_key_is_names_types_shapes_and_bytes(void **state) {
  (void)state;
  const float x[4] = {1, 2, 3, 4}, y[4] = {5, 6, 7, 8};
  const int64_t d4[] = {1, 4}, d22[] = {2, 2};
  struct pts_tensor ab[2] = {tensor("A", PTS_DTYPE_FP32, x, 16, 2, d4),
                             tensor("B", PTS_DTYPE_FP32, y, 16, 2, d4)};
  struct pts_tensor ba[2] = {ab[1], ab[0]};
  struct pts_cache_key k1 = key_of(7, ab, 2), k2 = key_of(7, ba, 2);
  assert_true(same_key(&k1, &k2)); /* the order of the inputs does not matter */

  float x2[4] = {1, 2, 3, 4.5f};
  struct pts_tensor other_data[2] = {tensor("A", PTS_DTYPE_FP32, x2, 16, 2, d4), ab[1]};
  struct pts_tensor other_shape[2] = {tensor("A", PTS_DTYPE_FP32, x, 16, 2, d22), ab[1]};
  struct pts_tensor other_type[2] = {tensor("A", PTS_DTYPE_INT32, x, 16, 2, d4), ab[1]};
  struct pts_tensor other_name[2] = {tensor("C", PTS_DTYPE_FP32, x, 16, 2, d4), ab[1]};
  struct pts_cache_key ks[5] = {key_of(7, other_data, 2), key_of(7, other_shape, 2),
                                key_of(7, other_type, 2), key_of(7, other_name, 2),
                                key_of(8, ab, 2)}; /* another load of the model */
  for (int i = 0; i < 5; i++) {
    assert_false(same_key(&k1, &ks[i]));
    pts_cache_key_clear(&ks[i]);
  }
  struct pts_cache_key kv;
  struct pts_error err;
  assert_int_equal(pts_cache_key_make(7, "m", 2, ab, 2, &kv, &err), PTS_OK);
  assert_false(same_key(&k1, &kv)); /* another version */
  pts_cache_key_clear(&kv);
  assert_int_equal(pts_cache_key_make(7, "n", 1, ab, 2, &kv, &err), PTS_OK);
  assert_false(same_key(&k1, &kv)); /* another model */
  pts_cache_key_clear(&kv);

  /* An input in device memory (a CUDA shared-memory region) is not read. */
  struct pts_tensor dev[2] = {ab[0], ab[1]};
  dev[1].mem = PTS_MEM_DEVICE;
  assert_int_equal(pts_cache_key_make(7, "m", 1, dev, 2, &kv, &err), PTS_UNSUPPORTED);
  assert_non_null(strstr(err.msg, "input 'B' is in device memory"));
  assert_null(kv.bytes);
  pts_cache_key_clear(&k1);
  pts_cache_key_clear(&k2);
}

static void a_hit_returns_a_copy_of_what_was_stored(void **state) {
  (void)state;
  struct pts_cache *c = pts_cache_new(1 << 20);
  assert_non_null(c);
  const float x[2] = {0.5f, 0.25f};
  const int64_t d2[] = {1, 2};
  struct pts_tensor in = tensor("INPUT0", PTS_DTYPE_FP32, x, 8, 2, d2);
  struct pts_cache_key k = key_of(1, &in, 1);
  struct pts_tensor got[2] = {{0}};
  assert_false(pts_cache_lookup(c, &k, got, 2));

  float y0[2] = {1.5f, -2.0f};
  int64_t y1[1] = {42};
  const int64_t d1[] = {1, 1};
  struct pts_tensor outs[2] = {tensor("OUTPUT0", PTS_DTYPE_FP32, y0, 8, 2, d2),
                               tensor("OUTPUT1", PTS_DTYPE_INT64, y1, 8, 2, d1)};
  struct pts_cache_key k_again = key_of(1, &in, 1);
  assert_true(pts_cache_insert(c, &k, outs, 2));
  assert_null(k.bytes); /* taken */
  y0[0] = 99.0f;        /* the cache kept its own copy */

  assert_false(pts_cache_lookup(c, &k_again, got, 1)); /* another output count: a miss */
  assert_true(pts_cache_lookup(c, &k_again, got, 2));
  assert_string_equal(got[0].name, "OUTPUT0");
  assert_int_equal(got[0].dtype, PTS_DTYPE_FP32);
  assert_int_equal(got[0].shape.ndim, 2);
  assert_int_equal(got[0].shape.dims[1], 2);
  assert_int_equal(got[0].byte_size, 8);
  const float *g0 = got[0].data;
  assert_true(g0[0] == 1.5f && g0[1] == -2.0f);
  assert_string_equal(got[1].name, "OUTPUT1");
  assert_int_equal(*(const int64_t *)got[1].data, 42);
  assert_non_null(got[0].buf);

  struct pts_cache_stats st;
  pts_cache_get_stats(c, &st);
  assert_int_equal(st.hits, 1); /* of three lookups */
  assert_int_equal(st.misses, 2);
  assert_int_equal(st.entries, 1); /* one stored, none evicted */
  assert_int_equal(st.evictions, 0);
  assert_true(st.bytes > 16 && st.bytes <= st.capacity);

  /* A second answer to the same key is not stored. */
  struct pts_cache_key dup = key_of(1, &in, 1);
  assert_false(pts_cache_insert(c, &dup, outs, 2));
  assert_null(dup.bytes);

  /* The views outlive the cache: they hold the bytes. */
  pts_cache_free(c);
  assert_true(g0[0] == 1.5f);
  pts_tensor_clear(&got[0]);
  pts_tensor_clear(&got[1]);
  pts_cache_key_clear(&k_again);
}

static bool cached(struct pts_cache *c, const struct pts_tensor *in) {
  struct pts_cache_key k = key_of(1, in, 1);
  struct pts_tensor got = {0};
  bool hit = pts_cache_lookup(c, &k, &got, 1);
  pts_tensor_clear(&got);
  pts_cache_key_clear(&k);
  return hit;
}

static void store(struct pts_cache *c, const struct pts_tensor *in, const struct pts_tensor *out,
                  bool expect) {
  struct pts_cache_key k = key_of(1, in, 1);
  assert_int_equal(pts_cache_insert(c, &k, out, 1), expect);
}

static void the_least_recently_used_answer_makes_room(void **state) {
  (void)state;
  const int64_t d[] = {1, 256};
  static float a[256], b[256], cc[256], out[256];
  a[0] = 1;
  b[0] = 2;
  cc[0] = 3;
  struct pts_tensor ia = tensor("X", PTS_DTYPE_FP32, a, sizeof a, 2, d);
  struct pts_tensor ib = tensor("X", PTS_DTYPE_FP32, b, sizeof b, 2, d);
  struct pts_tensor ic = tensor("X", PTS_DTYPE_FP32, cc, sizeof cc, 2, d);
  struct pts_tensor o = tensor("Y", PTS_DTYPE_FP32, out, sizeof out, 2, d);
  /* Each entry is a 1 KiB key and a 1 KiB answer and a little more: room
   * for two, not three. */
  struct pts_cache *c = pts_cache_new(5000);
  store(c, &ia, &o, true);
  store(c, &ib, &o, true);
  assert_true(cached(c, &ia)); /* A is now the most recently used */
  store(c, &ic, &o, true);     /* B makes room */
  assert_true(cached(c, &ia));
  assert_false(cached(c, &ib));
  assert_true(cached(c, &ic));
  struct pts_cache_stats st;
  pts_cache_get_stats(c, &st);
  assert_int_equal(st.evictions, 1);
  assert_int_equal(st.entries, 2);
  assert_true(st.bytes <= 5000);

  /* An answer larger than the whole cache is not stored, and evicts nothing. */
  static float big[2048];
  const int64_t db[] = {1, 2048};
  struct pts_tensor ob = tensor("Y", PTS_DTYPE_FP32, big, sizeof big, 2, db);
  store(c, &ib, &ob, false);
  pts_cache_get_stats(c, &st);
  assert_int_equal(st.entries, 2);
  assert_int_equal(st.evictions, 1);

  /* An answer in device memory is not stored. */
  struct pts_tensor od = o;
  od.mem = PTS_MEM_DEVICE;
  store(c, &ib, &od, false);
  assert_false(cached(c, &ib));
  pts_cache_free(c);
}

static void keys_that_share_a_hash_never_share_an_answer(void **state) {
  (void)state;
  struct pts_cache *c = pts_cache_new(1 << 16);
  float y = 1.0f;
  const int64_t d[] = {1};
  struct pts_tensor o = tensor("Y", PTS_DTYPE_FP32, &y, 4, 1, d);
  struct pts_cache_key k1 = {.hash = 42, .len = 3, .bytes = (unsigned char *)pts_strdup("abc")};
  assert_true(pts_cache_insert(c, &k1, &o, 1));
  struct pts_cache_key k2 = {.hash = 42, .len = 3, .bytes = (unsigned char *)"abd"};
  struct pts_tensor got = {0};
  assert_false(pts_cache_lookup(c, &k2, &got, 1));
  struct pts_cache_key k3 = {.hash = 42, .len = 3, .bytes = (unsigned char *)"abc"};
  assert_true(pts_cache_lookup(c, &k3, &got, 1));
  pts_tensor_clear(&got);
  pts_cache_free(c);
}

static void many_entries_grow_the_table(void **state) {
  (void)state;
  struct pts_cache *c = pts_cache_new(64 << 20);
  float y = 0;
  const int64_t d[] = {1};
  struct pts_tensor o = tensor("Y", PTS_DTYPE_FP32, &y, 4, 1, d);
  for (int32_t i = 0; i < 3000; i++) {
    struct pts_tensor in = tensor("X", PTS_DTYPE_INT32, &i, 4, 1, d);
    store(c, &in, &o, true);
  }
  for (int32_t i = 0; i < 3000; i += 7) {
    struct pts_tensor in = tensor("X", PTS_DTYPE_INT32, &i, 4, 1, d);
    assert_true(cached(c, &in));
  }
  int32_t absent = 3000;
  struct pts_tensor in = tensor("X", PTS_DTYPE_INT32, &absent, 4, 1, d);
  assert_false(cached(c, &in));
  struct pts_cache_stats st;
  pts_cache_get_stats(c, &st);
  assert_int_equal(st.entries, 3000);
  assert_int_equal(st.evictions, 0);
  pts_cache_free(c);
}

static void cache_config_takes_tritons_local_size(void **state) {
  (void)state;
  struct pts_error err;
  size_t bytes = 1;
  const char *none[] = {NULL};
  assert_int_equal(pts_cache_parse_config(none, 0, &bytes, &err), PTS_OK);
  assert_int_equal(bytes, 0);
  const char *one[] = {"local,size=1048576"};
  assert_int_equal(pts_cache_parse_config(one, 1, &bytes, &err), PTS_OK);
  assert_int_equal(bytes, 1048576);
  const char *two[] = {"local,size=10", "local,size=20"};
  assert_int_equal(pts_cache_parse_config(two, 2, &bytes, &err), PTS_OK);
  assert_int_equal(bytes, 20); /* the last one given */

  const char *redis[] = {"redis,host=localhost"};
  assert_int_equal(pts_cache_parse_config(redis, 1, &bytes, &err), PTS_UNSUPPORTED);
  assert_non_null(strstr(err.msg, "cache 'redis' is not supported"));
  const char *bare[] = {"local"};
  assert_int_equal(pts_cache_parse_config(bare, 1, &bytes, &err), PTS_INVALID_ARG);
  assert_non_null(strstr(err.msg, "expected <cache>,<key>=<value>"));
  const char *key[] = {"local,bytes=10"};
  assert_int_equal(pts_cache_parse_config(key, 1, &bytes, &err), PTS_INVALID_ARG);
  assert_non_null(strstr(err.msg, "no key 'bytes'"));
  const char *num[] = {"local,size=10k"};
  assert_int_equal(pts_cache_parse_config(num, 1, &bytes, &err), PTS_INVALID_ARG);
  assert_non_null(strstr(err.msg, "size must be a number of bytes, not '10k'"));
  const char *neg[] = {"local,size=-5"};
  assert_int_equal(pts_cache_parse_config(neg, 1, &bytes, &err), PTS_INVALID_ARG);
}

static void the_process_cache_starts_and_stops(void **state) {
  (void)state;
  struct pts_error err;
  assert_null(pts_cache_process());
  assert_int_equal(pts_cache_start(0, &err), PTS_OK); /* no size: no cache */
  assert_null(pts_cache_process());
  assert_int_equal(pts_cache_start(4096, &err), PTS_OK);
  assert_non_null(pts_cache_process());
  struct pts_cache_stats st;
  pts_cache_get_stats(pts_cache_process(), &st);
  assert_int_equal(st.capacity, 4096);
  pts_cache_stop();
  assert_null(pts_cache_process());
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(a_key_is_names_types_shapes_and_bytes),
      cmocka_unit_test(a_hit_returns_a_copy_of_what_was_stored),
      cmocka_unit_test(the_least_recently_used_answer_makes_room),
      cmocka_unit_test(keys_that_share_a_hash_never_share_an_answer),
      cmocka_unit_test(many_entries_grow_the_table),
      cmocka_unit_test(cache_config_takes_tritons_local_size),
      cmocka_unit_test(the_process_cache_starts_and_stops),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
