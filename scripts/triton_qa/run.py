"""Runs tritonserver's own QA tests (qa/L0_*) against a server, one fresh
server per test, and writes what passed and why the rest failed.

    run.py --qa QA_DIR --models MODELS_DIR --server NAME=COMMAND... --out DIR

QA_DIR is the fetched qa/ folder (the test files are run from it, unchanged,
with ../common on their path as in Triton's CI); MODELS_DIR is what
twins.py made. Each --server is a name and the command line that starts it
(the repository and the suite's flags are appended). Every server is run on
every test; the table puts them side by side.

Each suite below is what its test.sh does for those files: which repository,
which flags, which environment. Where a test.sh runs several tests on one
server, this runs one server per test (a failure then cannot leak into the
next test; no test here depends on an earlier one's state). Every server
of SUITES also gets --exit-on-error=false (L0_lifecycle's get exactly the
flags its test.sh gives, see LIFECYCLE): a twin one server can not load (Triton's
PyTorch backend refuses BYTES tensors of more than one dimension) then
fails the tests that use it, not every test of the repository.
"""
import argparse
import ast
import csv
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

# (suite, test file, classes and tests (None: every test of the file), the
# repository under MODELS_DIR, server flags, environment)
SHM_TESTS = """test_invalid_create_shm test_valid_create_set_register
test_unregister_before_register test_unregister_after_register
test_reregister_after_register test_unregister_after_inference
test_register_after_inference test_too_big_shm test_mixed_raw_shm
test_unregisterall test_infer_offset_out_of_bound test_infer_byte_size_out_of_bound
test_infer_integer_overflow test_register_out_of_bound test_register_reserved_names
test_python_client_leak""".split()
SHM_UNREGISTER = ["test_unregister_shm_during_inference_single_req",
                  "test_unregister_shm_during_inference_multiple_req",
                  "test_unregister_shm_after_inference"]
SUITES = (
    [("L0_http", "http_test.py", None, "python_unit_test_models", [], {}),
     ("L0_http", "python_http_aio_test.py", None, "models", [], {})]
    + [("L0_shared_memory", "shared_memory_test.py", [f"SharedMemoryTest.{t}"],
        "models", ["--log-verbose=1"], {"CLIENT_TYPE": c})
       for t in SHM_TESTS for c in ("http", "grpc")]
    + [("L0_shared_memory", "shared_memory_test.py",
        [f"TestSharedMemoryUnregister.{t}_{c}"], "python_models", ["--log-verbose=1"],
        {"CLIENT_TYPE": c}) for t in SHM_UNREGISTER for c in ("http", "grpc")]
    + [("L0_grpc", "python_unit_test.py", None, "models",
        ["--grpc-restricted-protocol=model-repository:admin-key=admin-value",
         "--grpc-restricted-protocol=inference,health:infer-key=infer-value"], {}),
       ("L0_grpc", "python_grpc_aio_test.py", None, "models", [], {}),
       ("L0_infer_zero", "infer_zero_test.py", None, "qa_identity_model_repository",
        [], {})]
)


# qa/L0_lifecycle: test.sh gives each test of lifecycle_test.py its own
# repository, flags and wait. Each entry: (test, variant, setup, flags,
# wait, environment, what test.sh greps the server log for). setup is bash
# run in a fresh copy of the suite's folder (cwd; {W} in flags) where
# $DATADIR is twins.py's lifecycle/, as test.sh's is the CI's data. wait:
# "ready" (util.sh's run_server; a strict server with a failed model
# counts when nothing is loading), "stable" (run_server_tolive, then
# wait_for_model_stable), "up" (run_server_nowait; sleep 10). Tests not
# listed are in LIFECYCLE_NOT_RUN, with why.
Q, F, I = "$DATADIR/qa_model_repository/", "_float32_float32_float32", "_int32_int32_int32"
ENS = "$DATADIR/qa_ensemble_model_repository/qa_model_repository/"
R, R0 = "--model-repository={W}/models", "--model-repository={W}/models_0"
PAD = "echo 'parameters { key: \"ENABLE_BATCH_PADDING\" value { string_value: \"YES\" } }' >> "
MODELFAIL = (f"mkdir models models_0; cp -r {Q}openvino{F} {Q}libtorch{F} models/; "
             f"{PAD}models/openvino{F}/config.pbtxt; cp -r {Q}onnx{F} {Q}plan{F} models_0/; "
             f"rm models/libtorch{F}/3/*")
CONTROL = (f"mkdir models; cp -r {Q}onnx{F} {ENS}simple_onnx{F} models/; "
           "sed -i 's/max_batch_size:.*/max_batch_size: 1/' models/*/config.pbtxt")
STARTUP = (f"mkdir models models_0; cp -r {Q}plan{F} {Q}onnx{F} {Q}libtorch{F} models/; "
           f"cp -r {ENS}simple_plan{F} {ENS}simple_onnx{F} {Q}libtorch{F} models_0/; "
           "sed -i 's/max_batch_size:.*/max_batch_size: 1/' models/plan*/config.pbtxt "
           "models/onnx*/config.pbtxt models_0/simple*/config.pbtxt")
POLLED = (f"mkdir models models_0; cp -r {Q}openvino{F} models/; "
          f"{PAD}models/openvino{F}/config.pbtxt; cp -r {Q}onnx{F} models_0/; "
          f"cp -r {Q}libtorch{F} .; cp -r {Q}libtorch{F} models/; rm -r models/libtorch{F}/3")
# the TorchScript twin needs its file in every version folder; the
# identity backend needs none, so test.sh makes them empty
IDENT = ("cp -r identity_zero_1_int32 models/; mkdir -p models/identity_zero_1_int32/2; "
         "cp models/identity_zero_1_int32/1/model.pt models/identity_zero_1_int32/2/; ")
POLICY = "echo 'version_policy: { specific { versions: [%s] }}' >> "
EXPL, POLL = "--model-control-mode=explicit", "--model-control-mode=poll --repository-poll-secs=1"
NOSTRICT = "--strict-model-config=false --strict-readiness=false"
# Triton's CI sets the container's version; the r25.07 built here says 2.59.0
NOEXIT = {"TRITON_SERVER_VERSION": "2.59.0"}
ON_RELOAD = f"{R} {EXPL} --exit-timeout-secs=5 --load-model=identity_zero_1_int32 {NOSTRICT}"
LIFECYCLE = [
    ("test_parse_error_noexit", "strict", "",
     "--model-repository=/tmp/xyzx --strict-readiness=true --exit-on-error=false", "up", NOEXIT, []),
    ("test_parse_error_noexit", "", "",
     "--model-repository=/tmp/xyzx --strict-readiness=false --exit-on-error=false", "up", NOEXIT, []),
    ("test_parse_error_noexit", "strict, 2 repositories", "mkdir models",
     f"--model-repository=/tmp/xyzx {R} --strict-readiness=true --exit-on-error=false", "up",
     NOEXIT, []),
    ("test_parse_error_noexit", "2 repositories", "mkdir models",
     f"{R} --model-repository=/tmp/xyzx --strict-readiness=false --exit-on-error=false", "up",
     NOEXIT, []),
    ("test_parse_error_modelfail", "", MODELFAIL,
     f"{R} {R0} --exit-on-error=false --exit-timeout-secs=5", "stable", {}, []),
    ("test_parse_error_modelfail_nostrict", "", MODELFAIL,
     f"{R} {R0} --exit-on-error=false --exit-timeout-secs=5 --strict-readiness=false", "stable",
     {}, []),
    ("test_parse_error_no_model_config", "",
     f"mkdir models models_0; cp -r {Q}openvino{F} {Q}libtorch{F} models/; "
     f"cp -r {Q}onnx{F} {Q}plan{F} models_0/; rm models/openvino{F}/config.pbtxt",
     f"{R} {R0} --exit-on-error=false --exit-timeout-secs=5 --strict-model-config=true", "stable",
     {}, ["failed to open text file for read",
          f"openvino{F}/config.pbtxt: No such file or directory"]),
    ("test_parse_error_model_no_version", "",
     f"mkdir -p models/openvino{F}; cp -r {Q}libtorch{F} {Q}onnx{F} {Q}plan{F} models/; "
     f"cp {Q}openvino{F}/config.pbtxt models/openvino{F}/",
     f"{R} --exit-on-error=false --exit-timeout-secs=5", "stable", {}, []),
    ("test_parse_ignore_zero_prefixed_version", "",
     f"mkdir models; cp -r {Q}libtorch{F} models/; mv models/libtorch{F}/3 models/libtorch{F}/003",
     f"{R} --exit-on-error=false --exit-timeout-secs=5", "ready", {},
     ["ignore version directory '003' which contains leading zeros in its directory name"]),
    ("test_parse_ignore_non_intergral_version", "",
     f"mkdir models; cp -r {Q}libtorch{F} models/; mv models/libtorch{F}/3 models/libtorch{F}/abc",
     f"{R} --exit-on-error=false --exit-timeout-secs=5", "ready", {},
     ["ignore version directory 'abc' which fails to convert to integral number"]),
    ("test_dynamic_model_load_unload", "",
     f"mkdir models; cp -r {Q}openvino{F} {Q}onnx{F} {Q}plan{F} models/; cp -r {Q}libtorch{F} .",
     f"{R} {POLL} --exit-timeout-secs=5", "ready", {}, []),
    ("test_dynamic_model_load_unload_disabled", "",
     f"mkdir models; cp -r {Q}openvino{F} {Q}onnx{F} {Q}plan{F} models/; cp -r {Q}libtorch{F} .",
     f"{R} --model-control-mode=none --exit-timeout-secs=5", "ready", {}, []),
    ("test_dynamic_version_load_unload", "", f"mkdir models; cp -r {Q}libtorch{I} models/",
     f"{R} {POLL} --exit-timeout-secs=5", "ready", {}, []),
    ("test_dynamic_version_load_unload_disabled", "", f"mkdir models; cp -r {Q}libtorch{I} models/",
     f"{R} --model-control-mode=none --exit-timeout-secs=5", "ready", {}, []),
    ("test_dynamic_model_modify", "",
     f"mkdir models; for i in libtorch plan; do cp -r {Q}${{i}}{F} models/; "
     f"sed '/^version_policy/d' {Q}${{i}}{F}/config.pbtxt > config.pbtxt.$i; "
     f"sed 's/output0_labels/wrong_output0_labels/' {Q}${{i}}{F}/config.pbtxt "
     f"> config.pbtxt.wrong.$i; sed 's/label/label9/' {Q}${{i}}{F}/output0_labels.txt "
     f"> models/${{i}}{F}/wrong_output0_labels.txt; done",
     f"{R} {POLL} --exit-timeout-secs=5", "ready", {}, []),
    ("test_dynamic_file_delete", "", f"mkdir models; cp -r {Q}onnx{F} {Q}plan{F} models/",
     f"{R} {POLL} --exit-timeout-secs=5 --strict-model-config=false", "ready", {}, []),
    ("test_multiple_model_repository_polling", "", POLLED,
     f"{R} {R0} {POLL} --exit-timeout-secs=5", "ready", {}, []),
    ("test_multiple_model_repository_control", "", POLLED,
     f"{R} {R0} {EXPL} --exit-timeout-secs=5", "ready", {}, []),
    ("test_model_control", "", CONTROL, f"{R} {EXPL} --exit-timeout-secs=5 {NOSTRICT}", "ready",
     {}, []),
    ("test_model_control_fail", "",
     f"mkdir models; cp -r {Q}onnx{F} models/; rm models/onnx{F}/*/*; "
     "sed -i 's/max_batch_size:.*/max_batch_size: 1/' models/*/config.pbtxt",
     f"{R} {EXPL} --exit-timeout-secs=5 {NOSTRICT}", "ready", {}, []),
    ("test_model_control_ensemble", "", CONTROL, f"{R} {EXPL} --exit-timeout-secs=5 {NOSTRICT}",
     "ready", {}, []),
    ("test_multiple_model_repository_control_startup_models", "", STARTUP,
     f"{R} {R0} {EXPL} {NOSTRICT} --exit-on-error=false --load-model=libtorch{F} "
     f"--load-model=plan{F} --load-model=simple_onnx{F}", "ready", {}, []),
    ("test_multiple_model_repository_control_startup_models", "--load-model=*", STARTUP,
     f"{R} {R0} {EXPL} {NOSTRICT} --exit-on-error=false --load-model=*", "ready", {}, []),
    ("test_model_repository_index", "",
     f"mkdir models models_0; cp -r {Q}plan{F} {Q}libtorch{F} {Q}onnx{F} models/; "
     f"cp -r {ENS}simple_plan{F} {ENS}simple_libtorch{F} {Q}onnx{F} models_0/",
     f"{R} {R0} {EXPL} {NOSTRICT} --exit-on-error=false --load-model=onnx{F} "
     f"--load-model=plan{F} --load-model=simple_libtorch{F}", "ready", {}, []),
] + [
    (t, proto, "mkdir models; " + setup, ON_RELOAD, "ready",
     {"TRITONSERVER_USE_GRPC": "1"} if proto == "grpc" else {}, [])
    for t, setup in [
        ("test_model_availability_on_reload_2",
         IDENT + POLICY % 1 + "models/identity_zero_1_int32/config.pbtxt; "
         "cp identity_zero_1_int32/config.pbtxt config.pbtxt.v2; " + POLICY % 2 + "config.pbtxt.v2"),
        ("test_model_availability_on_reload_3",
         IDENT + POLICY % 1 + "models/identity_zero_1_int32/config.pbtxt; "
         "cp models/identity_zero_1_int32/config.pbtxt config.pbtxt.new")]
    for proto in ("grpc", "http")
] + [
    ("test_file_override_security", "",
     f"mkdir models; cp -r {Q}onnx{F} models/; rm -r models/onnx{F}/1",
     f"{R} {EXPL} --load-model=onnx{F} --strict-model-config=false", "ready", {}, []),
    ("test_concurrent_model_load_unload", "",
     "mkdir models; cp -r identity_zero_1_int32 ensemble_zero_1_float32 "
     "../custom_models/custom_zero_1_float32 models/; mkdir models/ensemble_zero_1_float32/1; "
     "cat ../custom_models/creation_delay_10.pbtxt >> models/custom_zero_1_float32/config.pbtxt",
     f"{R} {EXPL}", "ready", {}, []),
    ("test_shutdown_with_live_connection", "", "mkdir models; cp -r ../python_models/add_sub models/",
     R, "ready", {"SERVER_PID": "{PID}", "SERVER_LOG": "{LOG}"}, []),
    ("test_add_custom_config", "",
     f"mkdir models; cp -r {Q}libtorch{F} models/; mkdir models/libtorch{F}/configs; "
     f"sed 's/^version_policy:.*/version_policy: {{ specific: {{ versions: [2] }}}}/' "
     f"{Q}libtorch{F}/config.pbtxt > config.pbtxt.custom.libtorch",
     f"{R} {POLL} --exit-timeout-secs=5 --model-config-name=custom", "ready", {}, []),
    ("test_delete_custom_config", "",
     f"mkdir models; cp -r {Q}libtorch{F} models/; mkdir models/libtorch{F}/configs; "
     f"sed 's/^version_policy:.*/version_policy: {{ specific: {{ versions: [2] }}}}/' "
     f"{Q}libtorch{F}/config.pbtxt > models/libtorch{F}/configs/custom.pbtxt",
     f"{R} {POLL} --exit-timeout-secs=5 --model-config-name=custom", "ready", {}, []),
    # creation_delay_sec "0": the twin's delay is its warmup, which is cut
    ("test_concurrent_same_model_load_unload_stress", "",
     "mkdir models; cp -r identity_zero_1_int32 models/; "
     "sed -i '/^model_warmup/,$d' models/identity_zero_1_int32/config.pbtxt",
     f"{R} {EXPL} --model-load-thread-count=32 --log-verbose=2", "ready", {}, []),
]
_PY = "needs the Python backend"
LIFECYCLE_NOT_RUN = [
    ("test_init_error_modelfail", "its models fail to initialize because an output is renamed "
     "in the config (sed s/OUTPUT/_OUTPUT/); a TorchScript model's outputs have no names, so "
     "the twin still loads"),
    ("test_model_availability_on_reload", "the test itself adds version 2 as an empty folder, "
     "a model for the identity backend, which reads no file; a TorchScript twin needs model.pt"),
    ("test_model_reload_fail", "asserts the identity backend's own message (\"GPU instances "
     "not supported\") for a KIND_GPU instance"),
    ("test_load_same_model_different_platform", "asserts the platform is tensorrt_plan, then "
     "pytorch_libtorch; the twin of the plan model is TorchScript too"),
    ("test_config_override", "the test's own config names the onnxruntime backend"),
    ("test_file_override", "the test reads model.onnx and names the onnxruntime backend"),
    ("test_shutdown_dynamic", "custom C++ backend (custom_zero_1_float32's execute_delay_ms); "
     "test.sh also greps tritonserver's gRPC shutdown log line"),
    ("test_shutdown_sequence", "custom C++ sequence backend (custom_sequence_int32)"),
    ("test_shutdown_ensemble", "custom C++ backend (custom_zero_1_float32's execute_delay_ms)"),
    ("test_load_gpu_limit", "needs a GPU and " + _PY[6:] + " (cuda_memory_consumer)"),
    ("test_concurrent_model_load_speedup", _PY + " (a sleep in initialize())"),
    ("test_concurrent_model_load", _PY + " (asserts the platform is python)"),
    ("test_concurrent_model_instance_load_speedup", _PY + " (a sleep in initialize())"),
    ("test_concurrent_model_instance_load_sanity", _PY + ", and KIND_GPU instances"),
    ("test_model_config_overwite", _PY + " (overridden with the identity backend)"),
    ("test_shutdown_while_background_unloading", _PY + " (a sleep in finalize())"),
    ("test_shutdown_while_loading", _PY + "; test.sh greps tritonserver's internal function "
     "names (OnLoadFinal, AsyncUnload) in its log"),
    ("test_load_new_model_version", _PY + ": it counts each version's initialize() in its log"),
]


def tests_of(path):
    """Class.test names of a unittest file, in file order."""
    tree = ast.parse(open(path).read())
    out = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            for f in node.body:
                if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                        f.name.startswith("test"):
                    out.append(f"{node.name}.{f.name}")
    return out


def port_free(port):
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def ready(srv, timeout):
    """As util.sh's wait_for_server_ready: /v2/health/ready answers 200; or,
    since a model that failed to load keeps a strict server unready, the
    server answers its repository index and no model there is still
    loading or unloading.
    False at once if the server exits."""
    end = time.time() + timeout
    while time.time() < end and srv.poll() is None:
        try:
            with urllib.request.urlopen("http://localhost:8000/v2/health/ready",
                                        timeout=1) as r:
                if r.status == 200:
                    return True
        except Exception:
            pass
        try:
            req = urllib.request.Request("http://localhost:8000/v2/repository/index",
                                         data=b"{}", method="POST")
            with urllib.request.urlopen(req, timeout=1) as r:
                states = [m.get("state") for m in json.load(r)]
                if states and not any(s in ("LOADING", "UNLOADING") for s in states):
                    return True
        except Exception:
            pass
        time.sleep(0.2)
    return False


def why(output):
    """The line that says why a test failed: the last exception or
    assertion message in unittest's report."""
    lines = [ln.strip() for ln in output.splitlines()]
    keys = ("AssertionError", "Error:", "Exception:", "InferenceServerException",
            "[StatusCode.", "failed to")
    hits = [ln for ln in lines if any(k in ln for k in keys)]
    text = hits[-1] if hits else (lines[-1] if lines else "no output")
    return re.sub(r"\s+", " ", text)[:240]


def up(srv, timeout):
    """As test.sh's run_server_nowait and sleep: the server answers HTTP
    at all (a server whose repository failed answers, but not live)."""
    end = time.time() + timeout
    while time.time() < end and srv.poll() is None:
        try:
            urllib.request.urlopen("http://localhost:8000/v2/health/live", timeout=1)
            return True
        except urllib.error.HTTPError:
            return True
        except Exception:
            time.sleep(0.2)
    return srv.poll() is None


def run_one(server_cmd, args, cwd, test_file, test, env, log_path, wait="ready",
            log_checks=()):
    """Starts the server with args, waits as `wait` says, runs one test in
    cwd, stops the server, and looks for log_checks in its log."""
    for _ in range(100):  # the previous server's ports, released
        if all(port_free(p) for p in (8000, 8001, 8002)):
            break
        time.sleep(0.1)
    os.makedirs(os.path.dirname(log_path), exist_ok=True)
    slog_path = log_path + ".server"
    with open(slog_path, "w") as slog:
        srv = subprocess.Popen(server_cmd + args, stdout=slog, stderr=subprocess.STDOUT,
                               start_new_session=True)
    env = {k: v.format(PID=srv.pid, LOG=slog_path) for k, v in env.items()}
    try:
        if not (up(srv, 15) if wait == "up" else ready(srv, 120)):
            with open(slog_path) as f:
                tail = [ln for ln in f.read().splitlines() if ln.strip()][-3:]
            return False, "server not ready: " + " | ".join(tail)[:240]
        p = subprocess.run([sys.executable, test_file, test], cwd=cwd,
                           env={**os.environ, **env}, capture_output=True, text=True,
                           timeout=600)
        out = p.stdout + p.stderr
        with open(log_path, "w") as f:
            f.write(out)
        # unittest prints OK only when it ran at least one test and all passed
        ok = p.returncode == 0 and re.search(r"^Ran [1-9]", out, re.M) and \
            re.search(r"^OK", out, re.M)
        if not ok:
            return False, why(out)
    except subprocess.TimeoutExpired:
        return False, "timed out after 600 s"
    finally:
        stop(srv)
    with open(slog_path, errors="replace") as f:
        slog = f.read()
    missing = [c for c in log_checks if c not in slog]
    if missing:
        return False, "server log lacks: " + missing[0][:200]
    return True, ""


def lifecycle_run(server_cmd, entry, qa, models, logs):
    """One L0_lifecycle test: a fresh copy of the suite's folder (its twins)
    beside ../common, ../custom_models and ../python_models, as test.sh
    runs in qa/L0_lifecycle; the entry's setup there; then run_one."""
    test, variant, setup, flags, wait, env, log_checks = entry
    base = os.path.join(logs, "lc", re.sub(r"[^\w.]", "_", f"{test}.{variant}"))
    shutil.rmtree(base, ignore_errors=True)
    data = os.path.join(models, "lifecycle")
    for d in ("custom_models", "python_models", "L0_lifecycle"):
        shutil.copytree(os.path.join(data, d), os.path.join(base, d))
    os.symlink(os.path.join(qa, "common"), os.path.join(base, "common"))
    cwd = os.path.join(base, "L0_lifecycle")
    p = subprocess.run(["bash", "-ec", setup], cwd=cwd, env={**os.environ, "DATADIR": data},
                       capture_output=True, text=True)
    if p.returncode:
        return False, "setup failed: " + p.stderr.strip()[-200:]
    return run_one(server_cmd, flags.format(W=cwd).split(), cwd,
                   os.path.join(qa, "L0_lifecycle", "lifecycle_test.py"), f"LifeCycleTest.{test}",
                   env, base + ".log", wait, log_checks)


def stop(srv):
    try:
        os.killpg(srv.pid, signal.SIGTERM)
        srv.wait(30)
    except ProcessLookupError:  # it had exited
        srv.wait()
    except subprocess.TimeoutExpired:
        os.killpg(srv.pid, signal.SIGKILL)
        srv.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--qa", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("--server", action="append", required=True,
                    help="NAME=COMMAND (COMMAND split on spaces)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default="", help="run only tests whose name has this")
    ap.add_argument("--suites", default="", help="run only these suites (L0_lifecycle ...)")
    a = ap.parse_args()
    servers = [(s.split("=", 1)[0], s.split("=", 1)[1].split()) for s in a.server]
    logs = os.path.join(a.out, "logs")
    os.makedirs(logs, exist_ok=True)
    rows = []
    want = lambda suite, test: (not a.suites or suite in a.suites.split()) and a.only in test
    for suite, test_file, tests, repo, flags, env in SUITES:
        for test in tests or tests_of(os.path.join(a.qa, suite, test_file)):
            if not want(suite, test):
                continue
            name = test + (f" [{env['CLIENT_TYPE']}]" if "CLIENT_TYPE" in env else "")
            row = {"suite": suite, "file": test_file, "test": name}
            for sname, cmd in servers:
                log = os.path.join(logs, sname, re.sub(
                    r"[^\w.]", "_", f"{suite}.{test}.{env.get('CLIENT_TYPE', '')}") + ".log")
                ok, reason = run_one(cmd, [f"--model-repository={os.path.join(a.models, repo)}",
                                           "--exit-on-error=false"] + flags,
                                     os.path.join(a.qa, suite), test_file, test, env, log)
                record(row, suite, test_file, name, sname, ok, reason)
            rows.append(row)
    for entry in LIFECYCLE:
        name = entry[0] + (f" [{entry[1]}]" if entry[1] else "")
        if not want("L0_lifecycle", name):
            continue
        row = {"suite": "L0_lifecycle", "file": "lifecycle_test.py", "test": name}
        for sname, cmd in servers:
            ok, reason = lifecycle_run(cmd, entry, a.qa, a.models, os.path.join(logs, sname))
            record(row, "L0_lifecycle", "lifecycle_test.py", name, sname, ok, reason)
        rows.append(row)
    for test, reason in LIFECYCLE_NOT_RUN:
        if want("L0_lifecycle", test):
            rows.append({"suite": "L0_lifecycle", "file": "lifecycle_test.py", "test": test,
                         **{n: "not run" for n, _ in servers},
                         **{n + " reason": reason for n, _ in servers}})
    fields = ["suite", "file", "test"] + [x for s, _ in servers for x in (s, s + " reason")]
    with open(os.path.join(a.out, "results.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
    write_table(rows, [s for s, _ in servers], os.path.join(a.out, "results.md"))


def record(row, suite, test_file, name, sname, ok, reason):
    row[sname] = "pass" if ok else "FAIL"
    row[sname + " reason"] = reason
    print(f"{suite}/{test_file} {name} {sname}: {row[sname]} {reason}", flush=True)


def write_table(rows, names, path):
    """Counts per file (a test not run is counted apart, neither passed nor
    failed), then every test that did not pass everywhere, with why."""
    def cell(s):
        return s.replace("|", "\\|")

    def counts(rs):
        run = [r for r in rs if r[names[0]] != "not run"]
        return [str(len(run)), str(len(rs) - len(run))] + [
            str(sum(r[n] == "pass" for r in run)) for n in names]
    with open(path, "w") as f:
        f.write("| suite | file | tests run | not run | " +
                " | ".join(f"{n} passed" for n in names) + " |\n")
        f.write("|---|---|---:|---:|" + "---:|" * len(names) + "\n")
        groups = {}
        for r in rows:
            groups.setdefault((r["suite"], r["file"]), []).append(r)
        for (suite, fname), rs in groups.items():
            f.write(f"| {suite} | {fname} | " + " | ".join(counts(rs)) + " |\n")
        f.write("| **all** | | " + " | ".join(f"**{c}**" for c in counts(rows)) + " |\n\n")
        f.write("Every test that failed on any server, with the line that says why, and "
                "those not run, with why:\n\n")
        f.write("| suite | test | " + " | ".join(names) + " |\n|---|---|" + "---|" * len(names) + "\n")
        for r in rows:
            if all(r[n] == "pass" for n in names):
                continue
            f.write(f"| {r['suite']} | {cell(r['test'])} | " + " | ".join(
                "pass" if r[n] == "pass" else f"{r[n]}: {cell(r[n + ' reason'])}"
                for n in names) + " |\n")

if __name__ == "__main__":
    main()
