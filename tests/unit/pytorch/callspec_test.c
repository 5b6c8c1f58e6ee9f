/* tests/unit/pytorch/callspec_test.c — call specifications to tensor names
 * (callspec.h). The spec strings are what torch 2.13's get_call_spec() and
 * torch.utils._pytree.treespec_dumps printed for the signatures named in
 * each test; the expected names follow Triton's rule (triton-anchor §1.4),
 * written out by hand. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "backends/pytorch/callspec.h"
#include "core/alloc.h"

#define LEAF "{\"type\": null, \"context\": null, \"children_spec\": []}"

/* forward(self, x, y, *, scale) -> {"sum": t, "pair": (t, t)} */
static const char *KW_IN =
    "[1, {\"type\": \"builtins.tuple\", \"context\": \"null\", \"children_spec\": ["
    "{\"type\": \"builtins.tuple\", \"context\": \"null\", \"children_spec\": [" LEAF ", " LEAF
    "]}, {\"type\": \"builtins.dict\", \"context\": \"[\\\"scale\\\"]\", \"children_spec\": [" LEAF
    "]}]}]";
static const char *KW_OUT =
    "[1, {\"type\": \"builtins.dict\", \"context\": \"[\\\"sum\\\", \\\"pair\\\"]\", "
    "\"children_spec\": [" LEAF ", {\"type\": \"builtins.tuple\", \"context\": \"null\", "
    "\"children_spec\": [" LEAF ", " LEAF "]}]}]";

/* forward(self, x) -> x */
static const char *ONE_IN =
    "[1, {\"type\": \"builtins.tuple\", \"context\": \"null\", \"children_spec\": ["
    "{\"type\": \"builtins.tuple\", \"context\": \"null\", \"children_spec\": [" LEAF "]}, "
    "{\"type\": \"builtins.dict\", \"context\": \"[]\", \"children_spec\": []}]}]";
static const char *ONE_OUT = "[1, " LEAF "]";

static struct pts_callspec *parse_ok(const char *in, const char *out) {
  struct pts_callspec *cs = NULL;
  struct pts_error err = {0};
  if (pts_callspec_parse(in, out, &cs, &err) != PTS_OK) fail_msg("%s", err.msg);
  return cs;
}

static struct pts_error parse_fails(const char *in, const char *out) {
  struct pts_callspec *cs = NULL;
  struct pts_error err = {0};
  assert_int_equal(pts_callspec_parse(in, out, &cs, &err), PTS_INVALID_ARG);
  assert_null(cs);
  return err;
}

static void single_tensor_is_args0_and_result(void **state) {
  (void)state;
  struct pts_callspec *cs = parse_ok(ONE_IN, ONE_OUT);
  assert_int_equal(pts_callspec_count(cs, PTS_CALLSPEC_INPUTS), 1);
  assert_string_equal(pts_callspec_name(cs, PTS_CALLSPEC_INPUTS, 0), "ARGS[0]");
  assert_int_equal(pts_callspec_count(cs, PTS_CALLSPEC_OUTPUTS), 1);
  assert_string_equal(pts_callspec_name(cs, PTS_CALLSPEC_OUTPUTS, 0), "RESULT");
  assert_null(pts_callspec_name(cs, PTS_CALLSPEC_OUTPUTS, 1));
  pts_callspec_free(cs);
}

static void kwargs_and_nested_dict_outputs(void **state) {
  (void)state;
  struct pts_callspec *cs = parse_ok(KW_IN, KW_OUT);
  const char *in[] = {"ARGS[0]", "ARGS[1]", "KWARGS[scale]"};
  const char *out[] = {"RESULT[sum]", "RESULT[pair][0]", "RESULT[pair][1]"};
  assert_int_equal(pts_callspec_count(cs, PTS_CALLSPEC_INPUTS), 3);
  assert_int_equal(pts_callspec_count(cs, PTS_CALLSPEC_OUTPUTS), 3);
  for (size_t i = 0; i < 3; i++) {
    assert_string_equal(pts_callspec_name(cs, PTS_CALLSPEC_INPUTS, i), in[i]);
    assert_string_equal(pts_callspec_name(cs, PTS_CALLSPEC_OUTPUTS, i), out[i]);
  }
  char list[64];
  pts_callspec_list(cs, PTS_CALLSPEC_INPUTS, list, sizeof list);
  assert_string_equal(list, "ARGS[0], ARGS[1], KWARGS[scale]");
  pts_callspec_free(cs);
}

static void resolve_forward_based_and_ordinal_names(void **state) {
  (void)state;
  struct pts_callspec *cs = parse_ok(KW_IN, KW_OUT);
  struct pts_error err = {0};
  size_t i = 99;
  assert_int_equal(pts_callspec_resolve(cs, PTS_CALLSPEC_INPUTS, "KWARGS[scale]", &i, &err), PTS_OK);
  assert_int_equal(i, 2);
  assert_int_equal(pts_callspec_resolve(cs, PTS_CALLSPEC_INPUTS, "INPUT__1", &i, &err), PTS_OK);
  assert_int_equal(i, 1);
  assert_int_equal(pts_callspec_resolve(cs, PTS_CALLSPEC_OUTPUTS, "RESULT[pair][1]", &i, &err),
                   PTS_OK);
  assert_int_equal(i, 2);
  assert_int_equal(pts_callspec_resolve(cs, PTS_CALLSPEC_OUTPUTS, "out__0", &i, &err), PTS_OK);
  assert_int_equal(i, 0);
  pts_callspec_free(cs);
}

static void resolve_errors_name_what_exists(void **state) {
  (void)state;
  struct pts_callspec *cs = parse_ok(KW_IN, KW_OUT);
  struct pts_error err = {0};
  size_t i;
  assert_int_equal(pts_callspec_resolve(cs, PTS_CALLSPEC_INPUTS, "image", &i, &err),
                   PTS_INVALID_ARG);
  assert_string_equal(err.msg,
                      "input 'image' matches no input of the package; its inputs are ARGS[0], "
                      "ARGS[1], KWARGS[scale], or by position <name>__0 to <name>__2");
  assert_int_equal(pts_callspec_resolve(cs, PTS_CALLSPEC_INPUTS, "INPUT__3", &i, &err),
                   PTS_INVALID_ARG);
  assert_string_equal(err.msg, "input 'INPUT__3' names position 3, but the package has 3 inputs");
  assert_int_equal(pts_callspec_resolve(cs, PTS_CALLSPEC_OUTPUTS, "RESULT[pair]", &i, &err),
                   PTS_INVALID_ARG);
  assert_string_equal(err.msg,
                      "output 'RESULT[pair]' is a container in the package, not a tensor; name "
                      "its tensors: RESULT[pair][0], RESULT[pair][1]");
  /* A prefix of a key is not a match. */
  assert_int_equal(pts_callspec_resolve(cs, PTS_CALLSPEC_OUTPUTS, "RESULT[su]", &i, &err),
                   PTS_INVALID_ARG);
  pts_callspec_free(cs);
}

static void lists_ordered_and_default_dicts(void **state) {
  (void)state;
  /* forward(self, xs: List[Tensor], d: Dict[str, Tensor]) ->
   *   OrderedDict(a=t, b=defaultdict(list, c=t)) */
  const char *in =
      "[1, {\"type\": \"builtins.tuple\", \"context\": \"null\", \"children_spec\": ["
      "{\"type\": \"builtins.tuple\", \"context\": \"null\", \"children_spec\": ["
      "{\"type\": \"builtins.list\", \"context\": \"null\", \"children_spec\": [" LEAF ", " LEAF
      "]}, {\"type\": \"builtins.dict\", \"context\": \"[\\\"k\\\"]\", \"children_spec\": [" LEAF
      "]}]}, {\"type\": \"builtins.dict\", \"context\": \"[]\", \"children_spec\": []}]}]";
  const char *out =
      "[1, {\"type\": \"collections.OrderedDict\", \"context\": \"[\\\"a\\\", \\\"b\\\"]\", "
      "\"children_spec\": [" LEAF ", {\"type\": \"collections.defaultdict\", \"context\": "
      "{\"default_factory_module\": \"builtins\", \"default_factory_name\": \"list\", "
      "\"dict_context\": [\"c\"]}, \"children_spec\": [" LEAF "]}]}]";
  struct pts_callspec *cs = parse_ok(in, out);
  assert_int_equal(pts_callspec_count(cs, PTS_CALLSPEC_INPUTS), 3);
  assert_string_equal(pts_callspec_name(cs, PTS_CALLSPEC_INPUTS, 0), "ARGS[0][0]");
  assert_string_equal(pts_callspec_name(cs, PTS_CALLSPEC_INPUTS, 1), "ARGS[0][1]");
  assert_string_equal(pts_callspec_name(cs, PTS_CALLSPEC_INPUTS, 2), "ARGS[1][k]");
  assert_int_equal(pts_callspec_count(cs, PTS_CALLSPEC_OUTPUTS), 2);
  assert_string_equal(pts_callspec_name(cs, PTS_CALLSPEC_OUTPUTS, 0), "RESULT[a]");
  assert_string_equal(pts_callspec_name(cs, PTS_CALLSPEC_OUTPUTS, 1), "RESULT[b][c]");
  pts_callspec_free(cs);
}

static void unsupported_containers_are_named(void **state) {
  (void)state;
  const char *out =
      "[1, {\"type\": \"builtins.tuple\", \"context\": \"null\", \"children_spec\": [" LEAF
      ", {\"type\": \"mymodule.Boxes\", \"context\": \"null\", \"children_spec\": [" LEAF "]}]}]";
  struct pts_error err = parse_fails(ONE_IN, out);
  assert_string_equal(err.msg,
                      "the package's output has a 'mymodule.Boxes' at RESULT[1]; ptserve serves "
                      "tuples, lists and dicts with tensors at the leaves");
}

static void unnameable_dict_keys_are_refused(void **state) {
  (void)state;
  const char *bad_keys[] = {"[\\\"a b\\\"]", "[\\\"x[0]\\\"]", "[1]", "[\\\"\\\"]"};
  for (size_t k = 0; k < 4; k++) {
    char out[512];
    snprintf(out, sizeof out,
             "[1, {\"type\": \"builtins.dict\", \"context\": \"%s\", \"children_spec\": [" LEAF
             "]}]",
             bad_keys[k]);
    struct pts_error err = parse_fails(ONE_IN, out);
    assert_non_null(strstr(err.msg, "a dict at RESULT with key"));
  }
}

static void malformed_specs_are_refused(void **state) {
  (void)state;
  struct pts_error err = parse_fails("not json", ONE_OUT);
  assert_non_null(strstr(err.msg, "the input call specification is not JSON"));
  err = parse_fails(ONE_IN, "[2, " LEAF "]");
  assert_string_equal(err.msg,
                      "the output call specification has version 2; ptserve reads version 1");
  err = parse_fails("[1, " LEAF "]", ONE_OUT);
  assert_string_equal(err.msg,
                      "the input call specification is not the (args, kwargs) pair torch.export "
                      "writes");
  err = parse_fails(ONE_IN, "[1, {\"type\": \"builtins.dict\", \"context\": \"[\\\"a\\\"]\", "
                            "\"children_spec\": []}]");
  assert_non_null(strstr(err.msg, "whose keys do not match its 0 values"));
  err = parse_fails(NULL, ONE_OUT);
  assert_non_null(strstr(err.msg, "not JSON (missing"));
}

static void deep_nesting_is_refused(void **state) {
  (void)state;
  char out[4096] = "[1, ";
  for (int i = 0; i < 40; i++)
    strcat(out, "{\"type\": \"builtins.tuple\", \"context\": \"null\", \"children_spec\": [");
  strcat(out, LEAF);
  for (int i = 0; i < 40; i++) strcat(out, "]}");
  strcat(out, "]");
  struct pts_error err = parse_fails(ONE_IN, out);
  assert_non_null(strstr(err.msg, "nests deeper than 32 levels"));
}

static void long_lists_are_cut(void **state) {
  (void)state;
  struct pts_callspec *cs = parse_ok(KW_IN, KW_OUT);
  char list[24];
  pts_callspec_list(cs, PTS_CALLSPEC_INPUTS, list, sizeof list);
  assert_string_equal(list, "ARGS[0], ARGS[1], ...");
  pts_callspec_free(cs);
}

static void allocation_failures_are_reported(void **state) {
  (void)state;
  /* Walk every allocation of a parse: each failure is NOMEM, never a crash
   * or a leak (ASan checks the latter). */
  for (long n = 0; n < 200; n++) {
    struct pts_callspec *cs = NULL;
    struct pts_error err = {0};
    pts_alloc_fail_after(n);
    enum pts_status st = pts_callspec_parse(KW_IN, KW_OUT, &cs, &err);
    pts_alloc_fail_after(-1);
    if (st == PTS_OK) {
      assert_int_equal(pts_callspec_count(cs, PTS_CALLSPEC_OUTPUTS), 3);
      pts_callspec_free(cs);
      return;
    }
    assert_int_equal(st, PTS_NOMEM);
  }
  fail_msg("parse never succeeded");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(single_tensor_is_args0_and_result),
      cmocka_unit_test(kwargs_and_nested_dict_outputs),
      cmocka_unit_test(resolve_forward_based_and_ordinal_names),
      cmocka_unit_test(resolve_errors_name_what_exists),
      cmocka_unit_test(lists_ordered_and_default_dicts),
      cmocka_unit_test(unsupported_containers_are_named),
      cmocka_unit_test(unnameable_dict_keys_are_refused),
      cmocka_unit_test(malformed_specs_are_refused),
      cmocka_unit_test(deep_nesting_is_refused),
      cmocka_unit_test(long_lists_are_cut),
      cmocka_unit_test(allocation_failures_are_reported),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
