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
also gets --exit-on-error=false: a twin one server can not load (Triton's
PyTorch backend refuses BYTES tensors of more than one dimension) then
fails the tests that use it, not every test of the repository.
"""
import argparse
import ast
import csv
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
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


def run_one(server_cmd, repo, flags, qa_dir, suite, test_file, test, env, logs):
    for _ in range(100):  # the previous server's ports, released
        if all(port_free(p) for p in (8000, 8001, 8002)):
            break
        time.sleep(0.1)
    os.makedirs(logs, exist_ok=True)
    log_path = os.path.join(logs, re.sub(r"[^\w.]", "_", f"{suite}.{test}.{env.get('CLIENT_TYPE', '')}") + ".log")
    with open(log_path + ".server", "w") as slog:
        srv = subprocess.Popen(server_cmd + [f"--model-repository={repo}",
                                            "--exit-on-error=false"] + flags,
                               stdout=slog, stderr=subprocess.STDOUT,
                               start_new_session=True)
    try:
        if not ready(srv, 120):
            with open(log_path + ".server") as f:
                tail = [ln for ln in f.read().splitlines() if ln.strip()][-3:]
            return False, "server not ready: " + " | ".join(tail)[:240]
        cwd = os.path.join(qa_dir, suite)
        p = subprocess.run([sys.executable, test_file, test], cwd=cwd,
                           env={**os.environ, **env}, capture_output=True, text=True,
                           timeout=600)
        out = p.stdout + p.stderr
        with open(log_path, "w") as f:
            f.write(out)
        # unittest prints OK only when it ran at least one test and all passed
        ok = p.returncode == 0 and re.search(r"^Ran [1-9]", out, re.M) and \
            re.search(r"^OK", out, re.M)
        return bool(ok), "" if ok else why(out)
    except subprocess.TimeoutExpired:
        return False, "timed out after 600 s"
    finally:
        stop(srv)


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
    a = ap.parse_args()
    servers = [(s.split("=", 1)[0], s.split("=", 1)[1].split()) for s in a.server]
    logs = os.path.join(a.out, "logs")
    os.makedirs(logs, exist_ok=True)
    rows = []
    for suite, test_file, tests, repo, flags, env in SUITES:
        for test in tests or tests_of(os.path.join(a.qa, suite, test_file)):
            if a.only not in test:
                continue
            name = test + (f" [{env['CLIENT_TYPE']}]" if "CLIENT_TYPE" in env else "")
            row = {"suite": suite, "file": test_file, "test": name}
            for sname, cmd in servers:
                ok, reason = run_one(cmd, os.path.join(a.models, repo), flags, a.qa,
                                     suite, test_file, test, env,
                                     os.path.join(logs, sname))
                row[sname] = "pass" if ok else "FAIL"
                row[sname + " reason"] = reason
                print(f"{suite}/{test_file} {name} {sname}: {row[sname]} {reason}",
                      flush=True)
            rows.append(row)
    fields = ["suite", "file", "test"] + [x for s, _ in servers for x in (s, s + " reason")]
    with open(os.path.join(a.out, "results.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
    write_table(rows, [s for s, _ in servers], os.path.join(a.out, "results.md"))


def write_table(rows, names, path):
    def cell(s):
        return s.replace("|", "\\|")
    with open(path, "w") as f:
        f.write("| suite | file | tests | " + " | ".join(f"{n} passed" for n in names) + " |\n")
        f.write("|---|---|---:|" + "---:|" * len(names) + "\n")
        groups = {}
        for r in rows:
            groups.setdefault((r["suite"], r["file"]), []).append(r)
        for (suite, fname), rs in groups.items():
            f.write(f"| {suite} | {fname} | {len(rs)} | " + " | ".join(
                str(sum(r[n] == "pass" for r in rs)) for n in names) + " |\n")
        f.write(f"| **all** | | **{len(rows)}** | " + " | ".join(
            f"**{sum(r[n] == 'pass' for r in rows)}**" for n in names) + " |\n\n")
        f.write("Every test that failed on any server, with the line that says why:\n\n")
        f.write("| suite | test | " + " | ".join(names) + " |\n|---|---|" + "---|" * len(names) + "\n")
        for r in rows:
            if all(r[n] == "pass" for n in names):
                continue
            f.write(f"| {r['suite']} | {cell(r['test'])} | " + " | ".join(
                "pass" if r[n] == "pass" else f"FAIL: {cell(r[n + ' reason'])}"
                for n in names) + " |\n")


if __name__ == "__main__":
    main()
