/* tests/unit/repository/repository_test.c — scanning, version directories,
 * version policies, failure states and model lifetime, on temporary
 * repositories of identity models. Expected versions and states follow
 * Triton's rules (protocol-facts §3.3 ModelVersionPolicy, §1.12), worked out
 * by hand for each directory layout. Includes repository.c to reach the
 * instance planner. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "repository/repository.c"
#include "server/fs_helpers.h"

struct fixture {
  char root[64];
  struct pts_repository *repo;
};

static int setup(void **state) {
  struct fixture *f = calloc(1, sizeof *f);
  if (!f || !fs_tempdir(f->root, sizeof f->root)) return -1;
  struct pts_log_settings quiet = {false, false, false, 0, PTS_LOG_FORMAT_DEFAULT};
  pts_log_set(&quiet);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  struct fixture *f = *state;
  pts_repository_destroy(f->repo);
  fs_rmtree(f->root);
  free(f);
  return 0;
}

static void load(struct fixture *f) {
  struct pts_error err;
  pts_error_clear(&err);
  const char *paths[] = {f->root};
  assert_int_equal(pts_repository_create(paths, 1, &f->repo, &err), PTS_OK);
}

/* The versions of `name` as "1:READY,5:UNAVAILABLE". */
static void versions_of(struct fixture *f, const char *name, char *out, size_t size) {
  const struct pts_repository_model *rm = pts_repository_find(f->repo, name);
  assert_non_null(rm);
  size_t used = 0;
  out[0] = '\0';
  for (size_t v = 0; v < rm->n_versions; v++) {
    const struct pts_model *m = rm->versions[v];
    used +=
        (size_t)snprintf(out + used, size - used, "%s%lld:%s", v ? "," : "",
                         (long long)pts_model_version(m), pts_model_state_name(pts_model_state(m)));
  }
}

static const char *reason_of(struct fixture *f, const char *name, size_t v) {
  const struct pts_repository_model *rm = pts_repository_find(f->repo, name);
  assert_non_null(rm);
  assert_true(v < rm->n_versions);
  return pts_model_reason(rm->versions[v]);
}

static void default_policy_serves_highest_numeric_version(void **state) {
  struct fixture *f = *state;
  assert_int_equal(fs_identity_model(f->root, "a", 8, NULL), 0);
  /* 10 is the highest number; "01", "0", "x" and "3abc" are not version
   * directories, and a plain file named 20 is not a directory. */
  const char *dirs[] = {"a/1", "a/2", "a/10", "a/01", "a/0", "a/x", "a/3abc"};
  for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++)
    assert_int_equal(fs_mkdirs(f->root, dirs[i]), 0);
  assert_int_equal(fs_write(f->root, "a/20", "not a directory"), 0);
  load(f);
  char got[256];
  versions_of(f, "a", got, sizeof got);
  assert_string_equal(got, "10:READY");
  assert_false(pts_repository_any_failed(f->repo));
}

static void policy_all_and_latest_n(void **state) {
  struct fixture *f = *state;
  assert_int_equal(fs_identity_model(f->root, "all", 8, "version_policy: { all {} }"), 0);
  assert_int_equal(
      fs_identity_model(f->root, "two", 8, "version_policy { latest { num_versions: 2 } }"), 0);
  const char *dirs[] = {"all/3", "all/1", "all/2", "two/1", "two/2", "two/3"};
  for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++)
    assert_int_equal(fs_mkdirs(f->root, dirs[i]), 0);
  load(f);
  char got[256];
  versions_of(f, "all", got, sizeof got);
  assert_string_equal(got, "1:READY,2:READY,3:READY");
  versions_of(f, "two", got, sizeof got);
  assert_string_equal(got, "2:READY,3:READY");
}

static void specific_policy_missing_version_is_unavailable(void **state) {
  struct fixture *f = *state;
  assert_int_equal(
      fs_identity_model(f->root, "s", 8, "version_policy { specific { versions: [ 5, 1 ] } }"), 0);
  assert_int_equal(fs_mkdirs(f->root, "s/1"), 0);
  assert_int_equal(fs_mkdirs(f->root, "s/2"), 0);
  load(f);
  char got[256];
  versions_of(f, "s", got, sizeof got);
  assert_string_equal(got, "1:READY,5:UNAVAILABLE");
  assert_non_null(strstr(reason_of(f, "s", 1), "version 5"));
  assert_non_null(strstr(reason_of(f, "s", 1), "not present"));
  assert_true(pts_repository_any_failed(f->repo));
}

static void only_model_directories_are_models(void **state) {
  struct fixture *f = *state;
  assert_int_equal(fs_identity_model(f->root, "b", 0, NULL), 0);
  assert_int_equal(fs_mkdirs(f->root, "b/1"), 0);
  assert_int_equal(fs_mkdirs(f->root, "notes/drafts"), 0); /* no config, no version */
  assert_int_equal(fs_identity_model(f->root, ".hidden", 0, NULL), 0);
  assert_int_equal(fs_write(f->root, "README", "text"), 0);
  assert_int_equal(fs_mkdirs(f->root, "only_version/1"), 0); /* a model without config */
  load(f);
  assert_int_equal(pts_repository_count(f->repo), 2);
  assert_string_equal(pts_repository_at(f->repo, 0)->name, "b");
  assert_string_equal(pts_repository_at(f->repo, 1)->name, "only_version");
  assert_null(pts_repository_find(f->repo, "notes"));
  assert_null(pts_repository_find(f->repo, ".hidden"));
}

static void broken_models_do_not_stop_the_others(void **state) {
  struct fixture *f = *state;
  assert_int_equal(fs_identity_model(f->root, "good", 8, NULL), 0);
  assert_int_equal(fs_mkdirs(f->root, "good/1"), 0);
  /* Config text error. */
  assert_int_equal(fs_mkdirs(f->root, "syntax/1"), 0);
  assert_int_equal(fs_write(f->root, "syntax/config.pbtxt", "name: \"syntax\"\ninput [ {\n"), 0);
  /* Identity needs as many outputs as inputs. */
  assert_int_equal(fs_mkdirs(f->root, "uneven/1"), 0);
  assert_int_equal(fs_write(f->root, "uneven/config.pbtxt",
                            "backend: \"identity\"\nmax_batch_size: 0\n"
                            "input [ { name: \"A\" data_type: TYPE_FP32 dims: [ 1 ] },"
                            " { name: \"B\" data_type: TYPE_FP32 dims: [ 1 ] } ]\n"
                            "output [ { name: \"C\" data_type: TYPE_FP32 dims: [ 1 ] } ]\n"),
                   0);
  /* No such backend. */
  assert_int_equal(fs_mkdirs(f->root, "nobackend/1"), 0);
  assert_int_equal(fs_write(f->root, "nobackend/config.pbtxt",
                            "backend: \"no_such\"\nmax_batch_size: 0\n"
                            "input [ { name: \"A\" data_type: TYPE_FP32 dims: [ 1 ] } ]\n"
                            "output [ { name: \"C\" data_type: TYPE_FP32 dims: [ 1 ] } ]\n"),
                   0);
  load(f);
  char got[256];
  versions_of(f, "good", got, sizeof got);
  assert_string_equal(got, "1:READY");
  versions_of(f, "syntax", got, sizeof got);
  assert_string_equal(got, "1:UNAVAILABLE");
  assert_true(strlen(reason_of(f, "syntax", 0)) > 0);
  versions_of(f, "uneven", got, sizeof got);
  assert_string_equal(got, "1:UNAVAILABLE");
  assert_non_null(strstr(reason_of(f, "uneven", 0), "Invalid argument: identity backend"));
  assert_non_null(strstr(reason_of(f, "uneven", 0), "2 inputs and 1 outputs"));
  versions_of(f, "nobackend", got, sizeof got);
  assert_string_equal(got, "1:UNAVAILABLE");
  assert_non_null(strstr(reason_of(f, "nobackend", 0), "'no_such'"));
  assert_true(pts_repository_any_failed(f->repo));
}

static void no_version_under_policy(void **state) {
  struct fixture *f = *state;
  assert_int_equal(fs_identity_model(f->root, "empty", 8, NULL), 0);
  load(f);
  char got[256];
  versions_of(f, "empty", got, sizeof got);
  assert_string_equal(got, "-1:UNAVAILABLE");
  assert_non_null(strstr(reason_of(f, "empty", 0), "at least one version must be available"));
}

static void same_model_in_two_repositories(void **state) {
  struct fixture *f = *state;
  char other[64];
  assert_non_null(fs_tempdir(other, sizeof other));
  assert_int_equal(fs_identity_model(f->root, "dup", 8, NULL), 0);
  assert_int_equal(fs_mkdirs(f->root, "dup/1"), 0);
  assert_int_equal(fs_identity_model(other, "dup", 8, NULL), 0);
  assert_int_equal(fs_mkdirs(other, "dup/1"), 0);
  assert_int_equal(fs_identity_model(other, "solo", 8, NULL), 0);
  assert_int_equal(fs_mkdirs(other, "solo/1"), 0);
  struct pts_error err;
  const char *paths[] = {f->root, other};
  assert_int_equal(pts_repository_create(paths, 2, &f->repo, &err), PTS_OK);
  char got[256];
  versions_of(f, "dup", got, sizeof got);
  assert_string_equal(got, "-1:UNAVAILABLE");
  assert_non_null(strstr(reason_of(f, "dup", 0), "more than one model repository"));
  versions_of(f, "solo", got, sizeof got);
  assert_string_equal(got, "1:READY");
  fs_rmtree(other);
}

static void unreadable_repository_fails(void **state) {
  struct fixture *f = *state;
  char missing[128];
  snprintf(missing, sizeof missing, "%s/not_there", f->root);
  const char *paths[] = {missing};
  struct pts_error err;
  pts_error_clear(&err);
  assert_int_equal(pts_repository_create(paths, 1, &f->repo, &err), PTS_INVALID_ARG);
  assert_null(f->repo);
  assert_non_null(strstr(err.msg, missing));
}

static void instance_plan_follows_groups(void **state) {
  (void)state;
  static const char text[] =
      "instance_group [ { name: \"g\" count: 2 kind: KIND_CPU },"
      " { name: \"h\" count: 1 kind: KIND_GPU gpus: [ 0, 3 ] } ]";
  Inference__ModelConfig *cfg = NULL;
  struct pts_error err;
  assert_int_equal(pts_model_config_parse(text, sizeof text - 1, "t", &cfg, &err), PTS_OK);
  struct instance_plan plan;
  assert_int_equal(plan_instances("m", cfg, &plan, &err), PTS_OK);
  assert_int_equal(plan.n, 4);
  static const struct {
    const char *name;
    int device;
  } want[] = {{"g_0", -1}, {"g_1", -1}, {"h_0", 0}, {"h_1", 3}};
  for (int i = 0; i < 4; i++) {
    assert_string_equal(plan.descs[i].name, want[i].name);
    assert_int_equal(plan.descs[i].device_id, want[i].device);
    assert_int_equal(plan.descs[i].index, i);
  }
  assert_int_equal(plan.descs[2].kind, INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_GPU);
  plan_free(&plan);
  pts_model_config_free(cfg);
}

static void zero_count_group_is_rejected(void **state) {
  (void)state;
  static const char text[] = "instance_group [ { name: \"z\" count: 0 kind: KIND_CPU } ]";
  Inference__ModelConfig *cfg = NULL;
  struct pts_error err;
  assert_int_equal(pts_model_config_parse(text, sizeof text - 1, "t", &cfg, &err), PTS_OK);
  struct instance_plan plan;
  assert_int_equal(plan_instances("m", cfg, &plan, &err), PTS_INVALID_ARG);
  assert_non_null(strstr(err.msg, "instance group 'z' of model 'm'"));
  pts_model_config_free(cfg);
}

static void model_outlives_repository_while_referenced(void **state) {
  struct fixture *f = *state;
  assert_int_equal(fs_identity_model(f->root, "kept", 8, NULL), 0);
  assert_int_equal(fs_mkdirs(f->root, "kept/4"), 0);
  load(f);
  struct pts_model *m = pts_model_retain(pts_repository_find(f->repo, "kept")->versions[0]);
  assert_int_equal(atomic_load(&m->refs), 2);
  pts_repository_destroy(f->repo);
  f->repo = NULL;
  /* Unloaded but still readable through the extra reference. */
  assert_int_equal(atomic_load(&m->refs), 1);
  assert_string_equal(pts_model_name(m), "kept");
  assert_int_equal(pts_model_version(m), 4);
  assert_int_equal(pts_model_state(m), PTS_MODEL_UNAVAILABLE);
  assert_string_equal(pts_model_reason(m), "unloaded");
  assert_non_null(pts_model_config(m));
  assert_int_equal(pts_model_config(m)->max_batch_size, 8);
  assert_null(pts_model_scheduler(m));
  pts_model_release(m); /* frees it: LeakSanitizer checks */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(default_policy_serves_highest_numeric_version, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(policy_all_and_latest_n, setup, teardown),
      cmocka_unit_test_setup_teardown(specific_policy_missing_version_is_unavailable, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(only_model_directories_are_models, setup, teardown),
      cmocka_unit_test_setup_teardown(broken_models_do_not_stop_the_others, setup, teardown),
      cmocka_unit_test_setup_teardown(no_version_under_policy, setup, teardown),
      cmocka_unit_test_setup_teardown(same_model_in_two_repositories, setup, teardown),
      cmocka_unit_test_setup_teardown(unreadable_repository_fails, setup, teardown),
      cmocka_unit_test(instance_plan_follows_groups),
      cmocka_unit_test(zero_count_group_is_rejected),
      cmocka_unit_test_setup_teardown(model_outlives_repository_while_referenced, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
