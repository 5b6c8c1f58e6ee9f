/* tests/unit/config/json_arena_test.c — jansson through the scratch
 * arena: documents parsed between begin and end read back the values of
 * their text (hand-written here), the same text parsed outside gives the
 * same values, a document larger than the arena still parses (the rest
 * from malloc) and frees cleanly, and values made outside begin/end outlive
 * an arena cycle (LSan and ASan check the frees). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "config/json_arena.h"

static const char header[] =
    "{\"id\":\"r1\",\"inputs\":[{\"name\":\"INPUT0\",\"shape\":[1,16],\"datatype\":\"FP32\","
    "\"parameters\":{\"binary_data_size\":64}}],\"outputs\":[{\"name\":\"OUTPUT0\","
    "\"parameters\":{\"binary_data\":true}}]}";

static void check_header(const json_t *root) {
  assert_non_null(root);
  assert_string_equal(json_string_value(json_object_get(root, "id")), "r1");
  const json_t *in = json_array_get(json_object_get(root, "inputs"), 0);
  assert_string_equal(json_string_value(json_object_get(in, "name")), "INPUT0");
  const json_t *shape = json_object_get(in, "shape");
  assert_int_equal(json_array_size(shape), 2);
  assert_int_equal(json_integer_value(json_array_get(shape, 1)), 16);
  assert_int_equal(
      json_integer_value(json_object_get(json_object_get(in, "parameters"), "binary_data_size")),
      64);
  const json_t *out = json_array_get(json_object_get(root, "outputs"), 0);
  assert_true(json_is_true(json_object_get(json_object_get(out, "parameters"), "binary_data")));
}

static void parses_inside_and_outside(void **state) {
  (void)state;
  json_error_t je;
  /* Made outside: from malloc, must survive the arena cycles below. */
  json_t *outside = json_loadb(header, strlen(header), JSON_REJECT_DUPLICATES, &je);
  check_header(outside);
  for (int round = 0; round < 3; round++) {
    pts_json_arena_begin();
    json_t *root = json_loadb(header, strlen(header), JSON_REJECT_DUPLICATES, &je);
    check_header(root);
    /* Values outside the arena can be made and freed meanwhile too. */
    json_t *extra = json_string("kept apart");
    json_decref(extra);
    json_decref(root);
    pts_json_arena_end();
  }
  check_header(outside);
  json_decref(outside);
}

/* 2,000 strings of 40 bytes: far more than the arena holds. */
static void overflows_into_malloc(void **state) {
  (void)state;
  static char text[2000 * 48 + 16];
  size_t n = 0;
  text[n++] = '[';
  for (int i = 0; i < 2000; i++)
    n += (size_t)snprintf(text + n, sizeof text - n, "%s\"value-%04d-abcdefghijklmnopqrstuvwxyz\"",
                          i ? "," : "", i);
  text[n++] = ']';
  json_error_t je;
  pts_json_arena_begin();
  json_t *root = json_loadb(text, n, 0, &je);
  assert_non_null(root);
  assert_int_equal(json_array_size(root), 2000);
  assert_string_equal(json_string_value(json_array_get(root, 0)),
                      "value-0000-abcdefghijklmnopqrstuvwxyz");
  assert_string_equal(json_string_value(json_array_get(root, 1999)),
                      "value-1999-abcdefghijklmnopqrstuvwxyz");
  json_decref(root);
  pts_json_arena_end();
}

/* A text that fails to parse releases what it made: nothing leaks. */
static void failed_parse_inside(void **state) {
  (void)state;
  json_error_t je;
  pts_json_arena_begin();
  assert_null(json_loadb("{\"a\":[1,2,", 10, 0, &je));
  pts_json_arena_end();
}

int main(void) {
  pts_json_arena_install();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(parses_inside_and_outside),
      cmocka_unit_test(overflows_into_malloc),
      cmocka_unit_test(failed_parse_inside),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
