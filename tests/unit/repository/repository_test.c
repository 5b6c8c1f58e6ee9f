/* tests/unit/repository/repository_test.c — scanning, version directories,
 * version policies, failure states, reloads, unloads, polls, file
 * overrides and model lifetime, on temporary repositories of identity
 * models. Expected versions and states follow Triton's rules
 * (protocol-facts §3.3 ModelVersionPolicy, §1.12; triton-anchor §2.5),
 * worked out by hand for each directory layout. Includes model.c to reach
 * the instance planner. No test waits on a clock: where a test needs a
 * load or unload in progress, it holds a reference (as a request in flight
 * does) or a load gate file, and waits for a state. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <sched.h>
#include <dirent.h>

#include "repository/model.c"
#include "repository/repository.h"
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

static void create(struct fixture *f) {
  struct pts_error err;
  pts_error_clear(&err);
  const char *paths[] = {f->root};
  assert_int_equal(pts_repository_create(paths, 1, &f->repo, &err), PTS_OK);
}

static enum pts_status load(struct fixture *f, const char *name, struct pts_error *err) {
  pts_error_clear(err);
  return pts_repository_load(f->repo, name, NULL, err);
}

static void load_ok(struct fixture *f, const char *name) {
  struct pts_error err;
  if (load(f, name, &err) != PTS_OK) fail_msg("load of '%s' failed: %s", name, err.msg);
}

/* The version records of `name` as "1:READY,5:UNAVAILABLE". */
static void versions_of(struct fixture *f, const char *name, char *out, size_t size) {
  struct pts_model **ms = NULL;
  size_t n = 0;
  struct pts_error err;
  assert_int_equal(pts_repository_snapshot(f->repo, name, false, &ms, &n, &err), PTS_OK);
  size_t used = 0;
  out[0] = '\0';
  for (size_t v = 0; v < n; v++)
    used += (size_t)snprintf(out + used, size - used, "%s%lld:%s", v ? "," : "",
                             (long long)pts_model_version(ms[v]),
                             pts_model_state_name(pts_model_state(ms[v])));
  pts_repository_snapshot_free(ms, n);
}

static void assert_versions(struct fixture *f, const char *name, const char *want) {
  char got[256];
  versions_of(f, name, got, sizeof got);
  if (strcmp(got, want) != 0) fail_msg("'%s': versions %s, want %s", name, got, want);
}

/* The reason of record `i` of `name`. */
static const char *reason_of(struct fixture *f, const char *name, size_t i) {
  static char buf[1024];
  struct pts_model **ms = NULL;
  size_t n = 0;
  struct pts_error err;
  assert_int_equal(pts_repository_snapshot(f->repo, name, false, &ms, &n, &err), PTS_OK);
  assert_true(i < n);
  pts_model_reason(ms[i], buf, sizeof buf);
  pts_repository_snapshot_free(ms, n);
  return buf;
}

static void assert_contains(const char *text, const char *needle) {
  if (!strstr(text, needle)) fail_msg("'%s' lacks '%s'", text, needle);
}

/* The one index entry of (name, version); fails when absent. */
static void index_entry(struct fixture *f, const char *name, int64_t version, char *state,
                        char *reason) {
  struct pts_index_entry *idx = NULL;
  size_t n = 0;
  struct pts_error err;
  assert_int_equal(pts_repository_index(f->repo, false, &idx, &n, &err), PTS_OK);
  bool found = false;
  for (size_t i = 0; i < n; i++) {
    if (strcmp(idx[i].name, name) != 0 || idx[i].version != version) continue;
    strcpy(state, pts_model_state_name(idx[i].state));
    snprintf(reason, 1024, "%s", idx[i].reason);
    found = true;
  }
  for (size_t i = 0; i < n; i++) {
    free(idx[i].name);
    free(idx[i].reason);
  }
  free(idx);
  if (!found) fail_msg("no index entry for '%s' version %lld", name, (long long)version);
}

/* ---------------------------------------------------- scanning, policy */

static void default_policy_serves_highest_numeric_version(void **state) {
  struct fixture *f = *state;
  assert_int_equal(fs_identity_model(f->root, "a", 8, NULL), 0);
  /* 10 is the highest number; "01", "0", "x" and "3abc" are not version
   * directories, and a plain file named 20 is not a directory. */
  const char *dirs[] = {"a/1", "a/2", "a/10", "a/01", "a/0", "a/x", "a/3abc"};
  for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++)
    assert_int_equal(fs_mkdirs(f->root, dirs[i]), 0);
  assert_int_equal(fs_write(f->root, "a/20", "not a directory"), 0);
  create(f);
  assert_versions(f, "a", ""); /* scanned, not loaded */
  load_ok(f, "a");
  assert_versions(f, "a", "10:READY");
  assert_true(pts_repository_all_ready(f->repo));
}

static void policy_all_and_latest_n(void **state) {
  struct fixture *f = *state;
  assert_int_equal(fs_identity_model(f->root, "all", 8, "version_policy: { all {} }"), 0);
  assert_int_equal(
      fs_identity_model(f->root, "two", 8, "version_policy { latest { num_versions: 2 } }"), 0);
  const char *dirs[] = {"all/3", "all/1", "all/2", "two/1", "two/2", "two/3"};
  for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++)
    assert_int_equal(fs_mkdirs(f->root, dirs[i]), 0);
  create(f);
  load_ok(f, "all");
  load_ok(f, "two");
  assert_versions(f, "all", "1:READY,2:READY,3:READY");
  assert_versions(f, "two", "2:READY,3:READY");
}

static void specific_policy_missing_version_is_unavailable(void **state) {
  struct fixture *f = *state;
  assert_int_equal(
      fs_identity_model(f->root, "s", 8, "version_policy { specific { versions: [ 5, 1 ] } }"), 0);
  assert_int_equal(fs_mkdirs(f->root, "s/1"), 0);
  assert_int_equal(fs_mkdirs(f->root, "s/2"), 0);
  create(f);
  load_ok(f, "s"); /* Triton loads the listed versions that exist */
  assert_versions(f, "s", "1:READY,5:UNAVAILABLE");
  assert_contains(reason_of(f, "s", 1), "version 5");
  assert_contains(reason_of(f, "s", 1), "not present");
  /* A version that is not there is not a failure to wait for. */
  assert_true(pts_repository_all_ready(f->repo));
}

static void only_model_directories_are_models(void **state) {
  struct fixture *f = *state;
  assert_int_equal(fs_identity_model(f->root, "b", 0, NULL), 0);
  assert_int_equal(fs_mkdirs(f->root, "b/1"), 0);
  assert_int_equal(fs_mkdirs(f->root, "notes/drafts"), 0); /* no config, no version */
  assert_int_equal(fs_identity_model(f->root, ".hidden", 0, NULL), 0);
  assert_int_equal(fs_write(f->root, "README", "text"), 0);
  assert_int_equal(fs_mkdirs(f->root, "only_version/1"), 0); /* a model without config */
  create(f);
  char **names = NULL;
  size_t n = 0;
  struct pts_error err;
  assert_int_equal(pts_repository_names(f->repo, &names, &n, &err), PTS_OK);
  assert_int_equal(n, 2);
  assert_string_equal(names[0], "b");
  assert_string_equal(names[1], "only_version");
  for (size_t i = 0; i < n; i++) free(names[i]);
  free(names);
  assert_int_equal(load(f, "notes", &err), PTS_NOT_FOUND);
  assert_contains(err.msg, "no model repository holds a model named 'notes'");
  assert_int_equal(load(f, ".hidden", &err), PTS_NOT_FOUND);
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
  create(f);
  struct pts_error err;
  assert_int_equal(load(f, "syntax", &err), PTS_INVALID_ARG);
  assert_contains(err.msg, "load failed for model 'syntax': ");
  assert_int_equal(load(f, "uneven", &err), PTS_INVALID_ARG);
  /* Triton's words for a version that failed. */
  assert_contains(err.msg, "load failed for model 'uneven': version 1 is at UNAVAILABLE state: "
                           "Invalid argument: identity backend");
  assert_int_equal(load(f, "nobackend", &err), PTS_INVALID_ARG);
  load_ok(f, "good");
  assert_versions(f, "good", "1:READY");
  assert_versions(f, "syntax", "1:UNAVAILABLE");
  assert_true(strlen(reason_of(f, "syntax", 0)) > 0);
  assert_versions(f, "uneven", "1:UNAVAILABLE");
  assert_contains(reason_of(f, "uneven", 0), "Invalid argument: identity backend");
  assert_contains(reason_of(f, "uneven", 0), "2 inputs and 1 outputs");
  assert_versions(f, "nobackend", "1:UNAVAILABLE");
  assert_contains(reason_of(f, "nobackend", 0), "'no_such'");
  assert_false(pts_repository_all_ready(f->repo));
}

static void no_version_under_policy(void **state) {
  struct fixture *f = *state;
  assert_int_equal(fs_identity_model(f->root, "empty", 8, NULL), 0);
  create(f);
  struct pts_error err;
  assert_int_equal(load(f, "empty", &err), PTS_INVALID_ARG);
  assert_versions(f, "empty", "-1:UNAVAILABLE");
  assert_contains(reason_of(f, "empty", 0), "at least one version must be available");
}

/* Triton's rule: a specific policy none of whose versions exists leaves
 * the model nothing to serve, so it fails (and readiness says so), with
 * the versions it named. */
static void specific_policy_with_no_version_present_fails(void **state) {
  struct fixture *f = *state;
  assert_int_equal(
      fs_identity_model(f->root, "none", 8, "version_policy { specific { versions: [ 1, 3 ] } }"),
      0);
  assert_int_equal(fs_mkdirs(f->root, "none/2"), 0);
  create(f);
  struct pts_error err;
  assert_int_equal(load(f, "none", &err), PTS_INVALID_ARG);
  assert_versions(f, "none", "-1:UNAVAILABLE");
  assert_contains(reason_of(f, "none", 0), "at least one version must be available");
  assert_contains(reason_of(f, "none", 0), "versions 1, 3");
  assert_false(pts_repository_all_ready(f->repo));
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
  assert_int_equal(load(f, "dup", &err), PTS_INVALID_ARG);
  assert_contains(err.msg, "failed to load 'dup', failed to poll from model repository: model "
                          "appears in two or more repositories");
  load_ok(f, "solo");
  assert_versions(f, "dup", "-1:UNAVAILABLE");
  /* Triton's exact reason: its QA compares it for equality. */
  assert_string_equal(reason_of(f, "dup", 0), "model appears in two or more repositories");
  /* Triton's poll leaves such a name out: it does not make the server
   * unready, and a lookup of a version says the model is not there. */
  assert_true(pts_repository_all_ready(f->repo));
  struct pts_model *m = NULL;
  assert_int_equal(pts_repository_get(f->repo, "dup", 1, true, &m, &err), PTS_NOT_FOUND);
  assert_contains(err.msg, "Request for unknown model: 'dup' is not found");
  assert_versions(f, "solo", "1:READY");
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
  assert_contains(err.msg, missing);
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
  assert_int_equal(plan_instances("m", cfg, 0, &plan, &err), PTS_OK);
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

/* A config without groups (an ensemble's) gets the backend's default
 * count of CPU instances, "<model>_<k>". */
static void instance_plan_default_count(void **state) {
  (void)state;
  static const char text[] = "platform: \"ensemble\"";
  Inference__ModelConfig *cfg = NULL;
  struct pts_error err;
  assert_int_equal(pts_model_config_parse(text, sizeof text - 1, "t", &cfg, &err), PTS_OK);
  struct instance_plan plan;
  assert_int_equal(plan_instances("e", cfg, 3, &plan, &err), PTS_OK);
  assert_int_equal(plan.n, 3);
  assert_string_equal(plan.descs[0].name, "e_0");
  assert_string_equal(plan.descs[2].name, "e_2");
  assert_int_equal(plan.descs[2].kind, INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_CPU);
  assert_int_equal(plan.descs[2].device_id, -1);
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
  assert_int_equal(plan_instances("m", cfg, 0, &plan, &err), PTS_INVALID_ARG);
  assert_contains(err.msg, "instance group 'z' of model 'm'");
  pts_model_config_free(cfg);
}

/* A model (with its version directory 1) whose version 1 fails to load:
 * the identity backend's fail_load_versions parameter. */
static void failing_model(struct fixture *f, const char *name) {
  assert_int_equal(fs_identity_model(f->root, name, 8,
                                     "parameters { key: \"fail_load_versions\" value { "
                                     "string_value: \"1\" } }"),
                   0);
  char dir[128];
  snprintf(dir, sizeof dir, "%s/1", name);
  assert_int_equal(fs_mkdirs(f->root, dir), 0);
}

static struct pts_model *get(struct fixture *f, const char *name, int64_t version) {
  struct pts_model *m = NULL;
  struct pts_error err;
  if (pts_repository_get(f->repo, name, version, false, &m, &err) != PTS_OK)
    fail_msg("get '%s' %lld: %s", name, (long long)version, err.msg);
  return m;
}

static void model_outlives_repository_while_referenced(void **state) {
  struct fixture *f = *state;
  assert_int_equal(fs_identity_model(f->root, "kept", 8, NULL), 0);
  assert_int_equal(fs_mkdirs(f->root, "kept/4"), 0);
  create(f);
  load_ok(f, "kept");
  struct pts_model *m = get(f, "kept", -1);
  assert_int_equal(atomic_load(&m->refs), 2);
  pts_repository_destroy(f->repo);
  f->repo = NULL;
  /* Unloaded but still readable through the extra reference. */
  assert_int_equal(atomic_load(&m->refs), 1);
  assert_string_equal(pts_model_name(m), "kept");
  assert_int_equal(pts_model_version(m), 4);
  assert_int_equal(pts_model_state(m), PTS_MODEL_UNAVAILABLE);
  char reason[64];
  pts_model_reason(m, reason, sizeof reason);
  assert_string_equal(reason, "unloaded");
  assert_non_null(pts_model_config(m));
  assert_int_equal(pts_model_config(m)->max_batch_size, 8);
  assert_null(pts_model_scheduler(m));
  pts_model_release(m); /* frees it: LeakSanitizer checks */
}

/* ----------------------------------------------------------- reloading */

struct op {
  struct fixture *f;
  const char *name;
  bool unload;
  const struct pts_load_params *params;
  enum pts_status st;
  struct pts_error err;
  pthread_t thread;
};

static void *op_main(void *arg) {
  struct op *o = arg;
  pts_error_clear(&o->err);
  o->st = o->unload ? pts_repository_unload(o->f->repo, o->name, &o->err)
                    : pts_repository_load(o->f->repo, o->name, o->params, &o->err);
  return NULL;
}

static void op_start(struct op *o) {
  assert_int_equal(pthread_create(&o->thread, NULL, op_main, o), 0);
}

static void op_join(struct op *o) { pthread_join(o->thread, NULL); }

static void wait_state(struct pts_model *m, enum pts_model_state s) {
  while (pts_model_state(m) != s) sched_yield();
}

/* The version in flight (a held reference, as a request holds it) keeps
 * serving while the new one takes over: the new one is READY before the
 * old one leaves the routing table, and the old one is only unloaded when
 * its last request is done. */
static void reload_swaps_in_the_new_version_first(void **state) {
  struct fixture *f = *state;
  assert_int_equal(fs_identity_model(f->root, "r", 8, NULL), 0);
  assert_int_equal(fs_mkdirs(f->root, "r/1"), 0);
  create(f);
  load_ok(f, "r");
  struct pts_model *old = get(f, "r", -1);
  assert_int_equal(pts_model_version(old), 1);
  assert_int_equal(fs_mkdirs(f->root, "r/2"), 0);
  struct op o = {.f = f, .name = "r"};
  op_start(&o);
  wait_state(old, PTS_MODEL_UNLOADING);
  /* Version 2 serves; version 1 is on its way out but still has its
   * scheduler for the request that holds it. */
  struct pts_model *now = get(f, "r", -1);
  assert_int_equal(pts_model_version(now), 2);
  assert_int_equal(pts_model_state(now), PTS_MODEL_READY);
  pts_model_release(now);
  assert_non_null(pts_model_scheduler(old));
  struct pts_model *m = NULL;
  struct pts_error err;
  assert_int_equal(pts_repository_get(f->repo, "r", 1, false, &m, &err), PTS_NOT_FOUND);
  assert_string_equal(err.msg, "Request for unknown model: 'r' version 1 is not at ready state "
                               "(version 1 is UNLOADING)");
  pts_model_release(old); /* the request is done */
  op_join(&o);
  assert_int_equal(o.st, PTS_OK);
  assert_versions(f, "r", "1:UNAVAILABLE,2:READY");
  assert_string_equal(reason_of(f, "r", 0), "unloaded");
  assert_true(pts_repository_all_ready(f->repo));
}

/* The model-ready endpoints ask pts_repository_ready, not a reference:
 * while a reload swaps in a new object of the same version, the object a
 * lookup just returned turns UNLOADING, but the model was ready all along
 * (the e2e soak once saw a 400 "Model version not ready" for it). */
static void readiness_holds_while_a_reload_replaces_the_version(void **state) {
  struct fixture *f = *state;
  assert_int_equal(fs_identity_model(f->root, "rr", 8, NULL), 0);
  assert_int_equal(fs_mkdirs(f->root, "rr/1"), 0);
  failing_model(f, "bad");
  create(f);
  load_ok(f, "rr");
  bool ready = false;
  struct pts_error err;
  assert_int_equal(pts_repository_ready(f->repo, "rr", -1, &ready, &err), PTS_OK);
  assert_true(ready);
  struct pts_model *old = get(f, "rr", 1); /* what the endpoint used to consult */
  struct op o = {.f = f, .name = "rr"};
  op_start(&o);
  wait_state(old, PTS_MODEL_UNLOADING);
  assert_int_equal(pts_repository_ready(f->repo, "rr", -1, &ready, &err), PTS_OK);
  assert_true(ready);
  assert_int_equal(pts_repository_ready(f->repo, "rr", 1, &ready, &err), PTS_OK);
  assert_true(ready);
  pts_model_release(old);
  op_join(&o);
  assert_int_equal(o.st, PTS_OK);

  /* Unknown names and versions are errors with the lookup's words; a
   * version that failed to load is known and not ready. */
  assert_int_equal(pts_repository_ready(f->repo, "nope", -1, &ready, &err), PTS_NOT_FOUND);
  assert_string_equal(err.msg, "Request for unknown model: 'nope' is not found");
  assert_int_equal(pts_repository_ready(f->repo, "rr", 7, &ready, &err), PTS_NOT_FOUND);
  assert_string_equal(err.msg, "Request for unknown model: 'rr' version 7 is not found");
  assert_int_equal(load(f, "bad", &err), PTS_INVALID_ARG);
  ready = true;
  assert_int_equal(pts_repository_ready(f->repo, "bad", -1, &ready, &err), PTS_OK);
  assert_false(ready);
  ready = true;
  assert_int_equal(pts_repository_ready(f->repo, "bad", 1, &ready, &err), PTS_OK);
  assert_false(ready);
}

static void reload_of_the_same_version_picks_up_the_config(void **state) {
  struct fixture *f = *state;
  assert_int_equal(fs_identity_model(f->root, "c", 8, NULL), 0);
  assert_int_equal(fs_mkdirs(f->root, "c/1"), 0);
  create(f);
  load_ok(f, "c");
  struct pts_model *old = get(f, "c", 1);
  assert_int_equal(pts_model_config(old)->max_batch_size, 8);
  pts_model_release(old); /* keep no reference: the reload then does not wait */
  assert_int_equal(fs_identity_model(f->root, "c", 4, NULL), 0);
  load_ok(f, "c");
  struct pts_model *now = get(f, "c", 1);
  assert_int_equal(pts_model_config(now)->max_batch_size, 4); /* the new config */
  pts_model_release(now);
  assert_versions(f, "c", "1:READY");
}

static void failed_reload_keeps_what_serves(void **state) {
  struct fixture *f = *state;
  assert_int_equal(fs_identity_model(f->root, "k", 8, NULL), 0);
  assert_int_equal(fs_mkdirs(f->root, "k/1"), 0);
  create(f);
  load_ok(f, "k");
  struct pts_model *before = get(f, "k", -1);
  pts_model_release(before);
  /* A half-written config. */
  assert_int_equal(fs_write(f->root, "k/config.pbtxt", "name: \"k\"\nbackend: \"ident"), 0);
  struct pts_error err;
  assert_int_equal(load(f, "k", &err), PTS_INVALID_ARG);
  assert_contains(err.msg, "load failed for model 'k': ");
  struct pts_model *after = get(f, "k", -1);
  assert_ptr_equal(after, before); /* the same version still serves */
  pts_model_release(after);
  char st[32], reason[1024];
  index_entry(f, "k", 1, st, reason);
  assert_string_equal(st, "READY");
  assert_contains(reason, "the last load failed, the previously loaded versions still serve");
  assert_true(pts_repository_all_ready(f->repo));
  /* Once the file is whole, the reload goes through and the note goes. */
  assert_int_equal(fs_identity_model(f->root, "k", 2, NULL), 0);
  load_ok(f, "k");
  index_entry(f, "k", 1, st, reason);
  assert_string_equal(st, "READY");
  assert_string_equal(reason, "");
}

/* A load is all or nothing (as Triton's): one version failing leaves the
 * versions that served before, and the versions that loaded with it are not
 * served either. */
static void a_failed_version_fails_the_whole_load(void **state) {
  struct fixture *f = *state;
  assert_int_equal(fs_identity_model(f->root, "v", 8, "version_policy: { all {} }"), 0);
  assert_int_equal(fs_mkdirs(f->root, "v/1"), 0);
  assert_int_equal(fs_mkdirs(f->root, "v/2"), 0);
  create(f);
  load_ok(f, "v");
  struct pts_model *v1 = get(f, "v", 1), *v2 = get(f, "v", 2);
  pts_model_release(v1);
  pts_model_release(v2);
  assert_int_equal(fs_identity_model(f->root, "v", 8,
                                     "version_policy: { all {} }\n"
                                     "parameters { key: \"fail_load_versions\" value { "
                                     "string_value: \"2\" } }"),
                   0);
  struct pts_error err;
  assert_int_equal(load(f, "v", &err), PTS_INVALID_ARG);
  assert_contains(err.msg, "load failed for model 'v': version 2 is at UNAVAILABLE state: "
                           "Invalid argument: identity backend: model 'v' version 2 fails");
  struct pts_model *a = get(f, "v", 1), *b = get(f, "v", 2);
  assert_ptr_equal(a, v1);
  assert_ptr_equal(b, v2);
  pts_model_release(a);
  pts_model_release(b);
  assert_versions(f, "v", "1:READY,2:READY");

  /* A model that never served: both versions end UNAVAILABLE, each with
   * its reason. */
  assert_int_equal(fs_identity_model(f->root, "w", 8,
                                     "version_policy: { all {} }\n"
                                     "parameters { key: \"fail_load_versions\" value { "
                                     "string_value: \"2\" } }"),
                   0);
  assert_int_equal(fs_mkdirs(f->root, "w/1"), 0);
  assert_int_equal(fs_mkdirs(f->root, "w/2"), 0);
  assert_int_equal(load(f, "w", &err), PTS_INVALID_ARG);
  assert_versions(f, "w", "1:UNAVAILABLE,2:UNAVAILABLE");
  assert_contains(reason_of(f, "w", 0), "unloaded: version 2 of the same load failed");
  assert_contains(reason_of(f, "w", 1), "version 2 fails to load");
  assert_false(pts_repository_all_ready(f->repo));
  struct pts_model *m = NULL;
  assert_int_equal(pts_repository_get(f->repo, "w", -1, false, &m, &err), PTS_NOT_FOUND);
  assert_contains(err.msg, "Request for unknown model: 'w' has no available versions (version 2 "
                           "is UNAVAILABLE: Invalid argument: identity backend");
}

/* The policy applies on every load: a specific policy that names a new
 * version swaps versions over. */
static void version_policy_applies_on_reload(void **state) {
  struct fixture *f = *state;
  assert_int_equal(
      fs_identity_model(f->root, "p", 8, "version_policy { specific { versions: [ 1 ] } }"), 0);
  for (int v = 1; v <= 3; v++) {
    char rel[16];
    snprintf(rel, sizeof rel, "p/%d", v);
    assert_int_equal(fs_mkdirs(f->root, rel), 0);
  }
  create(f);
  load_ok(f, "p");
  assert_versions(f, "p", "1:READY");
  assert_int_equal(
      fs_identity_model(f->root, "p", 8, "version_policy { specific { versions: [ 2, 3 ] } }"), 0);
  load_ok(f, "p");
  assert_versions(f, "p", "1:UNAVAILABLE,2:READY,3:READY");
  assert_int_equal(fs_identity_model(f->root, "p", 8, "version_policy { latest { num_versions: "
                                                      "1 } }"),
                   0);
  load_ok(f, "p");
  assert_versions(f, "p", "1:UNAVAILABLE,2:UNAVAILABLE,3:READY");
}

/* ----------------------------------------------------------- unloading */

static void unload_waits_for_requests_in_flight(void **state) {
  struct fixture *f = *state;
  assert_int_equal(fs_identity_model(f->root, "u", 8, NULL), 0);
  assert_int_equal(fs_mkdirs(f->root, "u/1"), 0);
  create(f);
  load_ok(f, "u");
  struct pts_model *inflight = get(f, "u", -1);
  struct op o = {.f = f, .name = "u", .unload = true};
  op_start(&o);
  wait_state(inflight, PTS_MODEL_UNLOADING);
  struct pts_model *m = NULL;
  struct pts_error err;
  assert_int_equal(pts_repository_get(f->repo, "u", -1, false, &m, &err), PTS_NOT_FOUND);
  assert_string_equal(err.msg, "Request for unknown model: 'u' has no available versions "
                               "(version 1 is UNLOADING)");
  assert_non_null(pts_model_scheduler(inflight)); /* still there for the request */
  pts_model_release(inflight);
  op_join(&o);
  assert_int_equal(o.st, PTS_OK);
  assert_versions(f, "u", "1:UNAVAILABLE");
  assert_string_equal(reason_of(f, "u", 0), "unloaded");
  assert_true(pts_repository_all_ready(f->repo));
  assert_int_equal(pts_repository_get(f->repo, "u", -1, false, &m, &err), PTS_NOT_FOUND);
  assert_string_equal(err.msg, "Request for unknown model: 'u' has no available versions "
                               "(version 1 is UNAVAILABLE: unloaded)");
  /* Unloading again, or a model never loaded, is fine; an unknown one is
   * not. */
  assert_int_equal(pts_repository_unload(f->repo, "u", &err), PTS_OK);
  assert_int_equal(pts_repository_unload(f->repo, "nope", &err), PTS_NOT_FOUND);
  assert_contains(err.msg, "failed to unload 'nope'");
  /* And it loads again. */
  load_ok(f, "u");
  assert_versions(f, "u", "1:READY");
}

/* A model LOADING for the first time is in the index as LOADING and
 * refused with its state; readiness waits for it. */
static void a_first_load_shows_loading(void **state) {
  struct fixture *f = *state;
  char gate[128], extra[512];
  snprintf(gate, sizeof gate, "%s/gate", f->root);
  snprintf(extra, sizeof extra,
           "parameters { key: \"load_gate_file\" value { string_value: \"%s\" } }", gate);
  assert_int_equal(fs_identity_model(f->root, "g", 8, extra), 0);
  assert_int_equal(fs_mkdirs(f->root, "g/1"), 0);
  create(f);
  char st[32], reason[1024];
  index_entry(f, "g", -1, st, reason); /* known, never loaded */
  assert_string_equal(st, "UNKNOWN");
  struct op o = {.f = f, .name = "g"};
  op_start(&o);
  for (;;) {
    char got[64];
    versions_of(f, "g", got, sizeof got);
    if (strcmp(got, "1:LOADING") == 0) break;
    sched_yield();
  }
  assert_false(pts_repository_all_ready(f->repo));
  struct pts_model *m = NULL;
  struct pts_error err;
  assert_int_equal(pts_repository_get(f->repo, "g", 1, false, &m, &err), PTS_NOT_FOUND);
  assert_contains(err.msg, "(version 1 is LOADING)");
  assert_int_equal(fs_write(f->root, "gate", ""), 0);
  op_join(&o);
  assert_int_equal(o.st, PTS_OK);
  assert_versions(f, "g", "1:READY");
  assert_true(pts_repository_all_ready(f->repo));
}

/* ------------------------------------------------------ state machine
 *
 * One test per edge of the state machine of docs/internals/repository.md
 * that the tests above do not already walk. A version object only moves
 * forward (LOADING, then READY, UNLOADING, UNAVAILABLE, or straight to
 * UNAVAILABLE); a new load makes a new object, which takes the place of
 * the old record in the table. */

/* The object itself, without a repository: where each marking leads. */
static void a_version_object_only_moves_forward(void **state) {
  (void)state;
  struct pts_model *m = pts_model_new("sm", 3);
  assert_non_null(m);
  assert_int_equal(pts_model_state(m), PTS_MODEL_LOADING); /* born LOADING */
  assert_false(pts_model_loaded(m));
  struct pts_error why;
  pts_error_set(&why, PTS_INVALID_ARG, "no good");
  pts_model_fail(m, &why); /* LOADING -> UNAVAILABLE, a failure */
  assert_int_equal(pts_model_state(m), PTS_MODEL_UNAVAILABLE);
  assert_true(pts_model_failed(m));
  char reason[128];
  pts_model_reason(m, reason, sizeof reason);
  assert_string_equal(reason, "Invalid argument: no good"); /* Triton's "<Code>: <message>" */
  /* Unloading a version that never started changes nothing: it keeps its
   * failure and reason. */
  pts_model_unload(m, 1);
  assert_int_equal(pts_model_state(m), PTS_MODEL_UNAVAILABLE);
  assert_true(pts_model_failed(m));
  /* Asked away: UNAVAILABLE "unloaded", no longer a failure. */
  pts_model_mark_unloaded(m, "unloaded");
  assert_int_equal(pts_model_state(m), PTS_MODEL_UNAVAILABLE);
  assert_false(pts_model_failed(m));
  pts_model_reason(m, reason, sizeof reason);
  assert_string_equal(reason, "unloaded");
  pts_model_release(m);

  /* A version the policy names but no directory holds: UNAVAILABLE with
   * its reason, not a failure. */
  struct pts_model *absent = pts_model_new("sm", 9);
  pts_error_set(&why, PTS_INVALID_ARG, "version 9 is not there");
  pts_model_absent(absent, &why);
  assert_int_equal(pts_model_state(absent), PTS_MODEL_UNAVAILABLE);
  assert_false(pts_model_failed(absent));
  pts_model_reason(absent, reason, sizeof reason);
  assert_string_equal(reason, "Invalid argument: version 9 is not there");
  pts_model_release(absent);
}

/* "load_gate_file" config text for `name`: its load waits for <root>/gate. */
static void gated_model(struct fixture *f, const char *name, const char *more) {
  char extra[1024];
  snprintf(extra, sizeof extra,
           "parameters { key: \"load_gate_file\" value { string_value: \"%s/gate\" } }\n%s",
           f->root, more ? more : "");
  assert_int_equal(fs_identity_model(f->root, name, 8, extra), 0);
}

static void wait_versions(struct fixture *f, const char *name, const char *want) {
  for (;;) {
    char got[256];
    versions_of(f, name, got, sizeof got);
    if (strcmp(got, want) == 0) return;
    sched_yield();
  }
}

/* UNAVAILABLE (failed) -> LOADING -> READY: a model whose load failed
 * loads once its files are fixed; readiness waits for it meanwhile and
 * comes back with it. */
static void a_failed_model_loads_once_fixed(void **state) {
  struct fixture *f = *state;
  failing_model(f, "fx");
  create(f);
  struct pts_error err;
  assert_int_equal(load(f, "fx", &err), PTS_INVALID_ARG);
  assert_versions(f, "fx", "1:UNAVAILABLE");
  struct pts_model *failed = NULL;
  assert_int_equal(pts_repository_get(f->repo, "fx", 1, true, &failed, &err), PTS_OK);
  assert_true(pts_model_failed(failed));
  assert_false(pts_repository_all_ready(f->repo));

  gated_model(f, "fx", NULL); /* fixed, and its load waits for the gate */
  struct op o = {.f = f, .name = "fx"};
  op_start(&o);
  wait_versions(f, "fx", "1:LOADING"); /* a new record took the failed one's place */
  assert_int_equal(pts_model_state(failed), PTS_MODEL_UNAVAILABLE); /* the old object stays */
  assert_false(pts_repository_all_ready(f->repo));
  struct pts_model *m = NULL;
  assert_int_equal(pts_repository_get(f->repo, "fx", -1, false, &m, &err), PTS_NOT_FOUND);
  assert_contains(err.msg, "(version 1 is LOADING)");
  assert_int_equal(fs_write(f->root, "gate", ""), 0);
  op_join(&o);
  assert_int_equal(o.st, PTS_OK);
  assert_versions(f, "fx", "1:READY");
  assert_true(pts_repository_all_ready(f->repo));
  m = get(f, "fx", 1);
  assert_ptr_not_equal(m, failed);
  pts_model_release(m);
  pts_model_release(failed);
}

/* UNAVAILABLE (failed) -> UNAVAILABLE (unloaded): unloading a model that
 * failed clears the failure, so readiness no longer waits for it. */
static void unloading_a_failed_model_clears_its_failure(void **state) {
  struct fixture *f = *state;
  failing_model(f, "uf");
  create(f);
  struct pts_error err;
  assert_int_equal(load(f, "uf", &err), PTS_INVALID_ARG);
  assert_false(pts_repository_all_ready(f->repo));
  char st[32], reason[1024];
  index_entry(f, "uf", 1, st, reason);
  assert_string_equal(st, "UNAVAILABLE");
  assert_contains(reason, "version 1 fails to load");
  assert_int_equal(pts_repository_unload(f->repo, "uf", &err), PTS_OK);
  assert_versions(f, "uf", "1:UNAVAILABLE");
  index_entry(f, "uf", 1, st, reason);
  assert_string_equal(st, "UNAVAILABLE");
  assert_string_equal(reason, "unloaded");
  assert_true(pts_repository_all_ready(f->repo));
}

/* READY stays READY while the same version reloads in the background; then
 * the new object is READY and the old one UNLOADING in one step, and the
 * old one is unloaded once its last reference (a request's) goes. */
static void a_background_reload_keeps_the_version_ready(void **state) {
  struct fixture *f = *state;
  char log_path[128];
  snprintf(log_path, sizeof log_path, "%s/log", f->root);
  assert_int_equal(fs_identity_model(f->root, "bg", 8, NULL), 0);
  assert_int_equal(fs_mkdirs(f->root, "bg/1"), 0);
  create(f);
  load_ok(f, "bg");
  struct pts_model *old = get(f, "bg", 1); /* a request in flight */

  /* The reload's backend load waits for the gate. "loading: bg:1" is
   * logged as a load of version 1 starts; the log file is opened after the
   * first load, so the line in it says the reload is under way. */
  gated_model(f, "bg", NULL);
  struct pts_log_settings info = {true, false, false, 0, PTS_LOG_FORMAT_DEFAULT};
  assert_int_equal(pts_log_set_file(log_path), 0);
  pts_log_set(&info);
  struct op o = {.f = f, .name = "bg"};
  op_start(&o);
  for (;;) {
    FILE *lf = fopen(log_path, "r");
    char line[512];
    bool started = false;
    while (lf && fgets(line, sizeof line, lf)) started = started || strstr(line, "loading: bg:1");
    if (lf) fclose(lf);
    if (started) break;
    sched_yield();
  }
  /* Mid-reload: the version serves on, readiness holds, the index says
   * READY without a reason. */
  assert_versions(f, "bg", "1:READY");
  assert_true(pts_repository_all_ready(f->repo));
  struct pts_model *now = get(f, "bg", -1);
  assert_ptr_equal(now, old);
  pts_model_release(now);
  char st[32], reason[1024];
  index_entry(f, "bg", 1, st, reason);
  assert_string_equal(st, "READY");
  assert_string_equal(reason, "");

  assert_int_equal(fs_write(f->root, "gate", ""), 0);
  wait_state(old, PTS_MODEL_UNLOADING); /* the swap */
  now = get(f, "bg", 1);
  assert_ptr_not_equal(now, old); /* a new object serves version 1 */
  assert_int_equal(pts_model_state(now), PTS_MODEL_READY);
  pts_model_release(now);
  assert_non_null(pts_model_scheduler(old)); /* still there for the request */
  pts_model_release(old); /* the request is done: the unload goes on */
  op_join(&o);
  struct pts_log_settings quiet = {false, false, false, 0, PTS_LOG_FORMAT_DEFAULT};
  pts_log_set(&quiet);
  pts_log_set_file(NULL);
  assert_int_equal(o.st, PTS_OK);
  assert_versions(f, "bg", "1:READY");
  FILE *lf = fopen(log_path, "r");
  assert_non_null(lf);
  char line[512];
  bool unloaded = false;
  while (fgets(line, sizeof line, lf))
    unloaded = unloaded || strstr(line, "successfully unloaded 'bg' version 1");
  fclose(lf);
  assert_true(unloaded);
}

/* LOADING -> UNAVAILABLE for a new version while the old one serves: the
 * old one stays READY (with a note in the index), strict readiness counts
 * the failure; the next good load replaces both (READY -> UNLOADING ->
 * UNAVAILABLE for version 1, UNAVAILABLE -> LOADING -> READY for 2). */
static void a_new_version_that_fails_leaves_the_old_one_serving(void **state) {
  struct fixture *f = *state;
  assert_int_equal(fs_identity_model(f->root, "nv", 8,
                                     "parameters { key: \"fail_load_versions\" value { "
                                     "string_value: \"2\" } }"),
                   0);
  assert_int_equal(fs_mkdirs(f->root, "nv/1"), 0);
  create(f);
  load_ok(f, "nv");
  struct pts_model *v1 = get(f, "nv", -1);
  assert_int_equal(pts_model_version(v1), 1);
  pts_model_release(v1);
  assert_int_equal(fs_mkdirs(f->root, "nv/2"), 0);
  struct pts_error err;
  assert_int_equal(load(f, "nv", &err), PTS_INVALID_ARG);
  assert_contains(err.msg, "version 2 is at UNAVAILABLE state");
  assert_versions(f, "nv", "1:READY,2:UNAVAILABLE");
  struct pts_model *m = get(f, "nv", -1);
  assert_ptr_equal(m, v1);
  pts_model_release(m);
  char st[32], reason[1024];
  index_entry(f, "nv", 1, st, reason);
  assert_string_equal(st, "READY");
  assert_contains(reason, "the last load failed, the previously loaded versions still serve");
  assert_false(pts_repository_all_ready(f->repo));

  assert_int_equal(fs_identity_model(f->root, "nv", 8, NULL), 0);
  load_ok(f, "nv");
  assert_versions(f, "nv", "1:UNAVAILABLE,2:READY");
  assert_string_equal(reason_of(f, "nv", 0), "unloaded");
  index_entry(f, "nv", 2, st, reason);
  assert_string_equal(reason, "");
  assert_true(pts_repository_all_ready(f->repo));
}

/* One operation per model at a time: an unload asked for while the first
 * load is LOADING runs after it (LOADING -> READY -> UNLOADING ->
 * UNAVAILABLE), never beside it. */
static void an_unload_waits_for_the_load_in_progress(void **state) {
  struct fixture *f = *state;
  gated_model(f, "lu", NULL);
  assert_int_equal(fs_mkdirs(f->root, "lu/1"), 0);
  create(f);
  struct op l = {.f = f, .name = "lu"};
  op_start(&l);
  wait_versions(f, "lu", "1:LOADING"); /* the load holds the model's operation */
  struct op u = {.f = f, .name = "lu", .unload = true};
  op_start(&u);
  assert_int_equal(fs_write(f->root, "gate", ""), 0);
  op_join(&l);
  op_join(&u);
  assert_int_equal(l.st, PTS_OK);
  assert_int_equal(u.st, PTS_OK);
  /* Had the unload run first, the load would have left it READY. */
  assert_versions(f, "lu", "1:UNAVAILABLE");
  assert_string_equal(reason_of(f, "lu", 0), "unloaded");
  assert_true(pts_repository_all_ready(f->repo));
}

/* ---------------------------------------------------------------- poll */

/* Triton's poll: a serving model that appears in a second repository is
 * unloaded (which copy is meant is unknown), its reason Triton's bare
 * text; once one copy goes, the other loads. */
static void poll_unloads_a_model_that_becomes_duplicated(void **state) {
  struct fixture *f = *state;
  char other[64];
  assert_non_null(fs_tempdir(other, sizeof other));
  assert_int_equal(fs_identity_model(f->root, "d", 8, NULL), 0);
  assert_int_equal(fs_mkdirs(f->root, "d/1"), 0);
  struct pts_error err;
  const char *paths[] = {f->root, other};
  assert_int_equal(pts_repository_create(paths, 2, &f->repo, &err), PTS_OK);
  load_ok(f, "d");
  assert_int_equal(fs_identity_model(other, "d", 8, NULL), 0);
  assert_int_equal(fs_mkdirs(other, "d/3"), 0);
  struct pts_repository_action *acts = NULL;
  size_t n = 0;
  assert_int_equal(pts_repository_poll(f->repo, &acts, &n, &err), PTS_OK);
  assert_int_equal(n, 1);
  assert_string_equal(acts[0].name, "d");
  assert_int_equal(acts[0].kind, PTS_REPOSITORY_UNLOAD);
  pts_repository_actions_free(acts, n);
  assert_int_equal(pts_repository_unload(f->repo, "d", &err), PTS_OK);
  /* Not served now: the next poll tries it, and it fails as a duplicate. */
  assert_int_equal(pts_repository_poll(f->repo, &acts, &n, &err), PTS_OK);
  assert_int_equal(n, 1);
  assert_int_equal(acts[0].kind, PTS_REPOSITORY_LOAD);
  pts_repository_actions_free(acts, n);
  assert_int_equal(load(f, "d", &err), PTS_INVALID_ARG);
  assert_string_equal(reason_of(f, "d", 0), "model appears in two or more repositories");
  char first[128];
  snprintf(first, sizeof first, "%s/d", f->root);
  fs_rmtree(first);
  assert_int_equal(pts_repository_poll(f->repo, &acts, &n, &err), PTS_OK);
  assert_int_equal(n, 1);
  assert_int_equal(acts[0].kind, PTS_REPOSITORY_LOAD);
  pts_repository_actions_free(acts, n);
  load_ok(f, "d");
  assert_versions(f, "d", "3:READY");
  fs_rmtree(other);
}

static void poll_sees_changes(void **state) {
  struct fixture *f = *state;
  assert_int_equal(fs_identity_model(f->root, "a", 8, NULL), 0);
  assert_int_equal(fs_mkdirs(f->root, "a/1"), 0);
  create(f);
  load_ok(f, "a");
  struct pts_repository_action *acts = NULL;
  size_t n = 0;
  struct pts_error err;
  assert_int_equal(pts_repository_poll(f->repo, &acts, &n, &err), PTS_OK);
  assert_int_equal(n, 0); /* nothing changed since the load */
  pts_repository_actions_free(acts, n);

  /* A new version, a new model. */
  assert_int_equal(fs_mkdirs(f->root, "a/2"), 0);
  assert_int_equal(fs_identity_model(f->root, "b", 8, NULL), 0);
  assert_int_equal(fs_mkdirs(f->root, "b/1"), 0);
  assert_int_equal(pts_repository_poll(f->repo, &acts, &n, &err), PTS_OK);
  assert_int_equal(n, 2);
  assert_string_equal(acts[0].name, "a");
  assert_int_equal(acts[0].kind, PTS_REPOSITORY_LOAD);
  assert_string_equal(acts[1].name, "b");
  assert_int_equal(acts[1].kind, PTS_REPOSITORY_LOAD);
  pts_repository_actions_free(acts, n);
  /* Queued and not yet started: not asked for twice. */
  assert_int_equal(pts_repository_poll(f->repo, &acts, &n, &err), PTS_OK);
  assert_int_equal(n, 0);
  pts_repository_actions_free(acts, n);
  load_ok(f, "a");
  load_ok(f, "b");
  assert_versions(f, "a", "1:UNAVAILABLE,2:READY");

  /* A changed file below a version directory. */
  assert_int_equal(fs_write(f->root, "b/1/weights", "w"), 0);
  assert_int_equal(pts_repository_poll(f->repo, &acts, &n, &err), PTS_OK);
  assert_int_equal(n, 1);
  assert_string_equal(acts[0].name, "b");
  pts_repository_actions_free(acts, n);
  load_ok(f, "b");

  /* A removed model is unloaded, then gone from the index. */
  char a_dir[128];
  snprintf(a_dir, sizeof a_dir, "%s/a", f->root);
  fs_rmtree(a_dir);
  assert_int_equal(pts_repository_poll(f->repo, &acts, &n, &err), PTS_OK);
  bool unload_a = false;
  for (size_t i = 0; i < n; i++)
    unload_a = unload_a ||
               (strcmp(acts[i].name, "a") == 0 && acts[i].kind == PTS_REPOSITORY_UNLOAD);
  assert_true(unload_a);
  pts_repository_actions_free(acts, n);
  assert_int_equal(pts_repository_unload(f->repo, "a", &err), PTS_OK);
  struct pts_index_entry *idx = NULL;
  assert_int_equal(pts_repository_index(f->repo, false, &idx, &n, &err), PTS_OK);
  for (size_t i = 0; i < n; i++) {
    assert_string_not_equal(idx[i].name, "a");
    free(idx[i].name);
    free(idx[i].reason);
  }
  free(idx);
}

/* ------------------------------------------------------------ overrides */

static size_t count_entries(const char *dir) {
  DIR *d = opendir(dir);
  assert_non_null(d);
  size_t n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

static void file_overrides_load_from_a_private_directory(void **state) {
  struct fixture *f = *state;
  char tmp[128];
  snprintf(tmp, sizeof tmp, "%s/tmp", f->root);
  assert_int_equal(fs_mkdirs(f->root, "tmp"), 0);
  assert_int_equal(fs_mkdirs(f->root, "repo"), 0);
  setenv("TMPDIR", tmp, 1);
  char repo[128];
  snprintf(repo, sizeof repo, "%s/repo", f->root);
  const char *paths[] = {repo};
  struct pts_error err;
  assert_int_equal(pts_repository_create(paths, 1, &f->repo, &err), PTS_OK);
  static const char cfg[] =
      "{\"backend\": \"identity\", \"max_batch_size\": 2,"
      " \"input\": [{\"name\": \"I\", \"data_type\": \"TYPE_FP32\", \"dims\": [1]}],"
      " \"output\": [{\"name\": \"O\", \"data_type\": \"TYPE_FP32\", \"dims\": [1]}]}";
  struct pts_load_params p = {0};
  p.config = strdup(cfg);
  p.config_len = strlen(cfg);
  assert_int_equal(pts_load_params_add_file(&p, "3/model.pt", (uint8_t *)strdup("bytes"), 5, &err),
                   PTS_OK);
  assert_int_equal(pts_repository_load(f->repo, "fresh", &p, &err), PTS_OK);
  assert_versions(f, "fresh", "3:READY");
  assert_int_equal(count_entries(tmp), 1); /* the private directory lives with the model */
  assert_int_equal(pts_repository_unload(f->repo, "fresh", &err), PTS_OK);
  assert_int_equal(count_entries(tmp), 0); /* and goes with it */

  /* Paths that leave the directory are refused. */
  pts_load_params_clear(&p);
  p.config = strdup(cfg);
  p.config_len = strlen(cfg);
  assert_int_equal(pts_load_params_add_file(&p, "1/../../x", (uint8_t *)strdup("x"), 1, &err),
                   PTS_OK);
  assert_int_equal(pts_repository_load(f->repo, "fresh", &p, &err), PTS_INVALID_ARG);
  assert_contains(err.msg, "may not contain '..'");
  pts_load_params_clear(&p);
  p.config = strdup(cfg);
  p.config_len = strlen(cfg);
  assert_int_equal(pts_load_params_add_file(&p, "/etc/x", (uint8_t *)strdup("x"), 1, &err),
                   PTS_OK);
  assert_int_equal(pts_repository_load(f->repo, "fresh", &p, &err), PTS_INVALID_ARG);
  assert_contains(err.msg, "must be a relative path");
  pts_load_params_clear(&p);
  assert_int_equal(count_entries(tmp), 0);
  unsetenv("TMPDIR");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(default_policy_serves_highest_numeric_version, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(policy_all_and_latest_n, setup, teardown),
      cmocka_unit_test_setup_teardown(specific_policy_missing_version_is_unavailable, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(specific_policy_with_no_version_present_fails, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(poll_unloads_a_model_that_becomes_duplicated, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(only_model_directories_are_models, setup, teardown),
      cmocka_unit_test_setup_teardown(broken_models_do_not_stop_the_others, setup, teardown),
      cmocka_unit_test_setup_teardown(no_version_under_policy, setup, teardown),
      cmocka_unit_test_setup_teardown(same_model_in_two_repositories, setup, teardown),
      cmocka_unit_test_setup_teardown(unreadable_repository_fails, setup, teardown),
      cmocka_unit_test(instance_plan_follows_groups),
      cmocka_unit_test(instance_plan_default_count),
      cmocka_unit_test(zero_count_group_is_rejected),
      cmocka_unit_test_setup_teardown(model_outlives_repository_while_referenced, setup, teardown),
      cmocka_unit_test_setup_teardown(reload_swaps_in_the_new_version_first, setup, teardown),
      cmocka_unit_test_setup_teardown(readiness_holds_while_a_reload_replaces_the_version, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(reload_of_the_same_version_picks_up_the_config, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(failed_reload_keeps_what_serves, setup, teardown),
      cmocka_unit_test_setup_teardown(a_failed_version_fails_the_whole_load, setup, teardown),
      cmocka_unit_test_setup_teardown(version_policy_applies_on_reload, setup, teardown),
      cmocka_unit_test_setup_teardown(unload_waits_for_requests_in_flight, setup, teardown),
      cmocka_unit_test_setup_teardown(a_first_load_shows_loading, setup, teardown),
      cmocka_unit_test(a_version_object_only_moves_forward),
      cmocka_unit_test_setup_teardown(a_failed_model_loads_once_fixed, setup, teardown),
      cmocka_unit_test_setup_teardown(unloading_a_failed_model_clears_its_failure, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(a_background_reload_keeps_the_version_ready, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(a_new_version_that_fails_leaves_the_old_one_serving, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(an_unload_waits_for_the_load_in_progress, setup, teardown),
      cmocka_unit_test_setup_teardown(poll_sees_changes, setup, teardown),
      cmocka_unit_test_setup_teardown(file_overrides_load_from_a_private_directory, setup,
                                      teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
