"""The ptserve command line: tritonserver's flags, start-up, failure and
shutdown behaviour (triton-anchor §2.14, protocol-facts §1.3, §1.12)."""
import json
import os
import re
import signal
import subprocess

import pytest
import requests

from conftest import assert_no_sanitizer_report, run_cli

TIMEOUT = 10
GOOD_FP32 = {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 4],
                         "data": [1, 2, 3, 4]}]}


def stop_cleanly(server, sig=signal.SIGTERM):
    rc = server.stop(sig)
    log = server.log()
    assert_no_sanitizer_report(log)
    assert rc == 0, "exit code %s after %s\n%s" % (rc, sig, log)
    return log


def table_rows(log):
    """{model: [(version, status), ...]} from the start-up model table
    ("| Model | Version | Status |" rows, as tritonserver prints it)."""
    rows = {}
    for m in re.finditer(r"^\|\s*([^|\s][^|]*?)\s*\|\s*([^|]*?)\s*\|\s*(.*?)\s*\|\s*$", log, re.M):
        rows.setdefault(m.group(1), []).append((m.group(2), m.group(3)))
    return rows


def infer_ok(server, model):
    r = requests.post(server.url + "/v2/models/%s/infer" % model, data=json.dumps(GOOD_FP32),
                      timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    assert r.json()["outputs"][0]["data"] == [1.0, 2.0, 3.0, 4.0]


# ---------------------------------------------------------------- flags

def test_help_lists_flags(ptserve_bin):
    rc, out = run_cli(ptserve_bin, "--help")
    assert rc == 0, out
    for flag in ("--model-repository", "--http-port", "--http-address", "--http-thread-count",
                 "--http-max-input-size", "--exit-on-error", "--strict-readiness",
                 "--log-verbose"):
        assert flag in out, "%s missing from --help:\n%s" % (flag, out)


def test_unknown_flag(ptserve_bin, model_repo):
    rc, out = run_cli(ptserve_bin, "--model-repository", model_repo("identity"),
                      "--no-such-flag")
    assert rc != 0, out
    assert "--no-such-flag" in out


def test_missing_model_repository(ptserve_bin):
    rc, out = run_cli(ptserve_bin, "--http-port", "0")
    assert rc != 0, out
    assert "model-repository" in out


def test_model_repository_not_a_directory(ptserve_bin, tmp_path):
    missing = tmp_path / "does-not-exist"
    rc, out = run_cli(ptserve_bin, "--model-repository", missing, "--http-port", "0")
    assert rc != 0, out
    assert str(missing) in out


def test_flag_value_not_a_number(ptserve_bin, model_repo):
    rc, out = run_cli(ptserve_bin, "--model-repository", model_repo("identity"),
                      "--http-port", "eighty")
    assert rc != 0, out
    assert "eighty" in out or "http-port" in out


@pytest.mark.parametrize("flag,why", [
    ("--model-namespacing=true", "give models unique names"),
    ("--model-namespacing", "give models unique names"),
    ("--backend-config=pytorch,x=y", "set a model's backend options as parameters"),
    ("--model-load-gpu-limit=0:0.5", "loads are not limited by GPU memory")])
def test_unsupported_tritonserver_flag(ptserve_bin, model_repo, flag, why):
    """Refused by name, with the reason and what to use instead."""
    rc, out = run_cli(ptserve_bin, "--model-repository", model_repo("identity"), flag)
    assert rc != 0, out
    assert flag.split("=")[0] + " is a tritonserver flag that ptserve does not support: " in out
    assert why in out, out


def test_model_namespacing_false_is_the_default(start_server, ptserve_bin, model_repo):
    """--model-namespacing=false asks for tritonserver's default, which is
    what ptserve does (one namespace): the server starts and serves; a value
    that is no boolean is refused by name."""
    s = start_server(model_repo("identity"), "--model-namespacing=false")
    assert requests.get(s.url + "/v2/health/ready", timeout=TIMEOUT).status_code == 200
    rc, out = run_cli(ptserve_bin, "--model-repository", model_repo("identity"),
                      "--model-namespacing=maybe")
    assert rc != 0, out
    assert "invalid value 'maybe' for --model-namespacing" in out, out


# The identity backend's test hook fails the first two loads of the version.
FLAKY = """name: "flaky"
backend: "identity"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
parameters { key: "fail_load_attempts" value: { string_value: "2" } }
"""


@pytest.mark.parametrize("retries", [0, 1, 2, 5])
def test_model_load_retry_count(start_server, tmp_path, retries):
    """--model-load-retry-count (tritonserver's meaning): a failed load is
    tried again at once, up to that many times. Two failures need two
    retries; each retried failure is a warning with its reason, and the
    reason of the last one stays in the index when all of them fail."""
    repo = tmp_path / "repo"
    (repo / "flaky" / "1").mkdir(parents=True)
    (repo / "flaky" / "config.pbtxt").write_text(FLAKY)
    s = start_server(repo, "--model-load-retry-count=%d" % retries, "--exit-on-error=false",
                     expect_ready=False)
    log = s.log()
    assert log.count("--model-load-retry-count): ") == min(retries, 2), log
    ready = requests.get(s.url + "/v2/models/flaky/ready", timeout=TIMEOUT).status_code == 200
    assert ready == (retries >= 2), log
    if ready:
        r = requests.post(s.url + "/v2/models/flaky/infer", data=json.dumps({"inputs": [
            {"name": "INPUT0", "datatype": "FP32", "shape": [4], "data": [1, 2, 3, 4]}]}),
            timeout=TIMEOUT)
        assert r.status_code == 200 and r.json()["outputs"][0]["data"] == [1, 2, 3, 4], r.text
    else:
        index = requests.post(s.url + "/v2/repository/index", timeout=TIMEOUT).json()
        reason = [m for m in index if m["name"] == "flaky"][0]["reason"]
        assert "load attempt %d fails" % (retries + 1) in reason, index
    stop_cleanly(s)


def instance_thread_cpus(server, instance):
    """The CPUs the instance's thread may run on (its Cpus_allowed_list):
    the thread is named after the instance (at most 15 characters)."""
    task = "/proc/%d/task" % server.proc.pid
    for tid in os.listdir(task):
        with open(os.path.join(task, tid, "comm")) as f:
            if f.read().strip() == instance[:15]:
                with open(os.path.join(task, tid, "status")) as st:
                    line = [ln for ln in st if ln.startswith("Cpus_allowed_list:")][0]
                return line.split(":", 1)[1].strip()
    raise AssertionError("no thread named %s" % instance)


def id_config(name, group=""):
    return ('name: "%s"\nbackend: "identity"\nmax_batch_size: 8\n'
            'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
            'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
            'instance_group [ { count: 1 kind: KIND_CPU %s } ]\n' % (name, group))


@pytest.mark.skipif(os.cpu_count() < 2, reason="binding needs two CPUs to tell apart")
def test_host_policy_binds_instance_threads(start_server, tmp_path):
    """--host-policy (tritonserver's meaning): 'cpu' binds every KIND_CPU
    instance without a policy of its own; a group's host_policy names
    another; cpu-cores confines the instance's thread to those CPUs (read
    back from the kernel), and the instances still answer."""
    repo = tmp_path / "repo"
    for name, group in (("by_kind", ""), ("by_name", 'host_policy: "first_core"')):
        (repo / name / "1").mkdir(parents=True)
        (repo / name / "config.pbtxt").write_text(id_config(name, group))
    last = os.cpu_count() - 1
    s = start_server(repo, "--host-policy=cpu,cpu-cores=%d-%d" % (last, last),
                     "--host-policy=first_core,cpu-cores=0-0", "--host-policy=first_core,numa-node=0")
    assert instance_thread_cpus(s, "by_kind_0_0") == str(last)
    assert instance_thread_cpus(s, "by_name_0_0") == "0"
    log = s.log()
    assert "instance 'by_kind_0_0' of model 'by_kind' runs under host policy 'cpu'" in log, log
    assert "instance 'by_name_0_0' of model 'by_name' runs under host policy 'first_core'" in log
    for model in ("by_kind", "by_name"):
        r = requests.post(s.url + "/v2/models/%s/infer" % model, data=json.dumps(
            {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 4],
                         "data": [1, 2, 3, 4]}]}), timeout=TIMEOUT)
        assert r.status_code == 200 and r.json()["outputs"][0]["data"] == [1, 2, 3, 4], r.text
    stop_cleanly(s)


@pytest.mark.parametrize("value, words", [
    ("cpu,gpu-count=1", "Unsupported host policy setting 'gpu-count' is specified, supported "
                        "settings are 'numa-node', 'cpu-cores'"),
    ("cpu,cpu-cores=3", "host policy setting 'cpu-cores' format is "
                        "'<lower_cpu_core_id>-<upper_cpu_core_id>'. Got 3"),
    ("cpu,cpu-cores=0-4096", "is not a range of this machine's CPUs"),
    ("cpu,numa-node=x", "Parsing 'numa-node' value: Can't parse 'x' to integer"),
    ("cpu,numa-node=63", "NUMA node 63 does not exist on this machine"),
    ("cpu", "--host-policy expects <policy_name>,<setting>=<value>"),
])
def test_host_policy_refusals(ptserve_bin, model_repo, value, words):
    rc, out = run_cli(ptserve_bin, "--model-repository", model_repo("identity"),
                      "--host-policy=" + value)
    assert rc != 0, out
    assert words in out, out


@pytest.mark.parametrize("value", ["abc", "-1", "1e9", ""])
def test_pinned_memory_pool_refuses_what_is_not_a_byte_count(ptserve_bin, model_repo, value):
    rc, out = run_cli(ptserve_bin, "--model-repository", model_repo("identity"),
                      "--pinned-memory-pool-byte-size=" + value)
    assert rc != 0, out
    assert "invalid value '%s' for --pinned-memory-pool-byte-size" % value in out, out


def test_tritonserver_flags_without_effect_and_id(start_server, model_repo):
    """A tritonserver command line with flags for parts ptserve lacks starts,
    and the log names each flag that has no effect; --id is the name the
    server metadata reports, over HTTP and gRPC (tritonserver's meaning)."""
    import tritonclient.grpc as grpcclient
    s = start_server(model_repo("identity"), "--backend-directory=/opt/tritonserver/backends",
                     "--pinned-memory-pool-byte-size=268435456",
                     "--cuda-memory-pool-byte-size=0:67108864", "--id=triton")
    log = s.log()
    for flag in ("--backend-directory", "--cuda-memory-pool-byte-size"):
        assert flag + " is accepted for tritonserver's command lines and has no effect: " in log
    # The pinned pool has an effect: models on CUDA devices reserve it.
    assert "--pinned-memory-pool-byte-size is accepted" not in log, log
    assert "Pinned memory pool: 268435456 bytes of request bodies" in log, log
    assert requests.get(s.url + "/v2", timeout=10).json()["name"] == "triton"
    with grpcclient.InferenceServerClient(s.grpc_target) as c:
        assert c.get_server_metadata().name == "triton"
    infer_ok(s, "id_fp32")
    stop_cleanly(s)


# ---------------------------------------------------------------- start-up

def test_startup_model_table(start_server, model_repo):
    s = start_server(model_repo("identity"))
    log = s.log()
    assert re.search(r"^\|\s*Model\s*\|\s*Version\s*\|\s*Status\s*\|\s*$", log, re.M), log
    rows = table_rows(log)
    for model, version in (("id_fp32", "1"), ("id_multi", "1"), ("dt_bytes", "1"),
                           ("id_versions", "2"), ("id_specific", "1")):
        assert (version, "READY") in rows.get(model, []), (model, rows.get(model), log)
    assert {v for v, st in rows.get("id_all_versions", []) if st == "READY"} == {"1", "2", "3"}
    stop_cleanly(s)


def broken_reasons():
    # model -> what its reason must mention (the config problem, and where)
    return {
        "syntax_error": re.compile(r"10:1"),          # the stray ']' at line 10, column 1
        "unknown_backend": re.compile(r"no_such_backend"),
        "name_mismatch": re.compile(r"other_name"),
    }


def test_broken_repository_without_exit_on_error(start_server, model_repo):
    s = start_server(model_repo("broken"), "--exit-on-error=false", expect_ready=False)
    assert requests.get(s.url + "/v2/models/good/ready", timeout=TIMEOUT).status_code == 200
    infer_ok(s, "good")

    log = s.log()
    rows = table_rows(log)
    assert ("1", "READY") in rows.get("good", []), log
    for model, reason in broken_reasons().items():
        statuses = [st for _, st in rows.get(model, [])]
        assert statuses and all(st.startswith("UNAVAILABLE") for st in statuses), (model, log)
        assert any(reason.search(st) for st in statuses), (model, statuses)

    r = requests.post(s.url + "/v2/repository/index", timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    index = r.json()
    by_name = {}
    for e in index:
        by_name.setdefault(e["name"], []).append(e)
    assert [e["state"] for e in by_name["good"]] == ["READY"]
    for model, reason in broken_reasons().items():
        entries = by_name.get(model)
        assert entries, (model, index)
        for e in entries:
            assert e["state"] == "UNAVAILABLE", e
            assert reason.search(e.get("reason", "")), e
    stop_cleanly(s)


def test_broken_repository_exits_by_default(ptserve_bin, model_repo):
    rc, out = run_cli(ptserve_bin, "--model-repository", model_repo("broken"),
                      "--http-port", "0")
    assert rc != 0, out
    assert "syntax_error" in out


def test_broken_repository_explicit_exit_on_error(ptserve_bin, model_repo):
    rc, out = run_cli(ptserve_bin, "--model-repository", model_repo("broken"),
                      "--http-port", "0", "--exit-on-error", "true")
    assert rc != 0, out


@pytest.mark.parametrize("strict,expected", [(None, 400), ("true", 400), ("false", 200)])
def test_strict_readiness(start_server, model_repo, strict, expected):
    args = ["--exit-on-error=false"]
    if strict is not None:
        args.append("--strict-readiness=" + strict)
    s = start_server(model_repo("broken"), *args, expect_ready=False)
    r = requests.get(s.url + "/v2/health/ready", timeout=TIMEOUT)
    assert r.status_code == expected
    assert r.json() == {"ready": expected == 200}
    assert requests.get(s.url + "/v2/health/live", timeout=TIMEOUT).status_code == 200
    stop_cleanly(s)


# ---------------------------------------------------------------- shutdown and logging

@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_stops_cleanly(start_server, model_repo, sig):
    s = start_server(model_repo("identity"))
    infer_ok(s, "id_fp32")
    stop_cleanly(s, sig)


def test_log_verbose_adds_lines(start_server, model_repo):
    logs = []
    for args in ([], ["--log-verbose", "1"]):
        s = start_server(model_repo("identity"), *args)
        infer_ok(s, "id_fp32")
        logs.append(stop_cleanly(s).splitlines())
    quiet, verbose = logs
    assert len(verbose) > len(quiet), "\n".join(verbose)
    # Verbose output adds lines; it does not drop the normal ones.
    assert any("READY" in line for line in verbose)


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_reuse_port_lets_two_servers_share_one(ptserve_bin, model_repo, tmp_path, protocol):
    """--reuse-http-port / --reuse-grpc-port (SO_REUSEPORT): two servers
    bind the same port and both serve it; without the flag the second
    stops at start-up naming the endpoint, as tritonserver does."""
    import time
    from conftest import free_port
    port = free_port()
    flag = "--reuse-%s-port=true" % protocol

    def start(i, *extra):
        log = open(tmp_path / ("s%d.log" % i), "w+")
        ports = (["--http-port", str(port), "--grpc-port", "0"] if protocol == "http"
                 else ["--http-port", "0", "--grpc-port", str(port)])
        p = subprocess.Popen([ptserve_bin, "--model-repository", model_repo("identity"),
                              "--metrics-port", "0"] + ports + list(extra),
                             stdout=log, stderr=subprocess.STDOUT)
        return p, log

    def wait_started(p, log):
        want = "Started HTTPService at" if protocol == "http" else "gRPC: serving on nghttp2"
        for _ in range(600):
            log.seek(0)
            text = log.read()
            if want in text and "Started HTTPService" in text:
                return
            assert p.poll() is None, text
            time.sleep(0.05)
        raise AssertionError("not started:\n" + text)

    servers = [start(0, flag), start(1, flag)]
    try:
        for p, log in servers:
            wait_started(p, log)
        assert all(p.poll() is None for p, _ in servers)
        if protocol == "http":
            for _ in range(8):  # the kernel spreads connections over both
                r = requests.post("http://127.0.0.1:%d/v2/models/id_fp32/infer" % port,
                                  json=GOOD_FP32, timeout=TIMEOUT)
                assert r.status_code == 200, r.text
                assert r.json()["outputs"][0]["data"] == [1, 2, 3, 4]
        # Without the flag, a third server can not have the port.
        rc, out = run_cli(ptserve_bin, "--model-repository", model_repo("identity"),
                          "--metrics-port", "0",
                          *(["--http-port", str(port), "--grpc-port", "0"] if protocol == "http"
                            else ["--http-port", "0", "--grpc-port", str(port)]))
        assert rc == 1, out
        want = "failed to bind the %s endpoint 0.0.0.0:%d: Address already in use" % (
            "HTTP" if protocol == "http" else "gRPC", port)
        assert want in out, out
    finally:
        for p, log in servers:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
            assert p.wait(timeout=60) == 0
            log.seek(0)
            assert_no_sanitizer_report(log.read())
            log.close()


def test_model_config_name_picks_the_variant(start_server, model_repo, tmp_path):
    """--model-config-name=<name>: a model with configs/<name>.pbtxt is
    loaded from it, one without from its config.pbtxt (tritonserver's
    rule); the variant here takes [2] where the default takes [4]."""
    import shutil
    repo = tmp_path / "repo"
    for m in ("id_fp32", "dt_int32"):
        shutil.copytree(os.path.join(model_repo("identity"), m), repo / m)
    (repo / "id_fp32" / "configs").mkdir()
    variant = (repo / "id_fp32" / "config.pbtxt").read_text().replace("dims: [ 4 ]",
                                                                        "dims: [ 2 ]")
    (repo / "id_fp32" / "configs" / "small.pbtxt").write_text(variant)
    s = start_server(str(repo), "--model-config-name=small")
    cfg = requests.get(s.url + "/v2/models/id_fp32/config", timeout=10).json()
    assert [i["dims"] for i in cfg["input"]] == [[2]], cfg
    r = requests.post(s.url + "/v2/models/id_fp32/infer", timeout=10, json={"inputs": [
        {"name": "INPUT0", "datatype": "FP32", "shape": [1, 2], "data": [1.5, -2]}]})
    assert r.status_code == 200 and r.json()["outputs"][0]["data"] == [1.5, -2.0], r.text
    default = (repo / "dt_int32" / "config.pbtxt").read_text()
    cfg = requests.get(s.url + "/v2/models/dt_int32/config", timeout=10).json()
    assert cfg["input"][0]["dims"] == [int(d) for d in
                                       re.search(r"dims: \[([^\]]*)\]", default).group(1).split(",")]
    stop_cleanly(s)
    # without the flag the same repository serves config.pbtxt's [4]
    s = start_server(str(repo))
    cfg = requests.get(s.url + "/v2/models/id_fp32/config", timeout=10).json()
    assert [i["dims"] for i in cfg["input"]] == [[4]], cfg
    stop_cleanly(s)
