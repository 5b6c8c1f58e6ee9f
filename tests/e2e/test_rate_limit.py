"""--rate-limit and --rate-limit-resource, with tritonserver r25.07's meaning
(core/src/rate_limiter.cc): with execution_count an instance executes only
when its group's rate_limiter resources are free, and of the instances
waiting the one with the fewest executions x priority goes first. What the
server executed when is read from its trace (COMPUTE_START, COMPUTE_END per
request); the expected orders are worked out in the tests from Triton's
rule, for requests the tests send all at once to identity models that
sleep a known time per execution."""
import json
import threading

import numpy as np
import pytest
import requests

from conftest import assert_clean_exit, run_cli
from sched_util import infer_fp32

DELAY_MS = 300


def model(root, name, resources=(), priority=0, delay_ms=DELAY_MS):
    res = ", ".join('{ name: "%s" count: %d%s }' % (n, c, " global: true" if g else "")
                    for n, c, g in resources)
    text = ('name: "%s"\nbackend: "identity"\nmax_batch_size: 0\n'
            'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
            'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
            'instance_group [ { kind: KIND_CPU count: 1 rate_limiter { resources [ %s ] '
            'priority: %d } } ]\n'
            'parameters { key: "execute_delay_ms" value: { string_value: "%d" } }\n'
            % (name, res, priority, delay_ms))
    (root / name / "1").mkdir(parents=True)
    (root / name / "config.pbtxt").write_text(text)


def trace_args(tmp_path):
    path = str(tmp_path / "trace.json")
    return path, ["--trace-config", "triton,file=" + path, "--trace-config", "level=TIMESTAMPS",
                  "--trace-config", "rate=1"]


def executions(path):
    """[(model, compute start ns, compute end ns)] in the order they began."""
    with open(path) as f:
        items = json.load(f)
    by_id = {}
    for item in items:
        t = by_id.setdefault(item["id"], {"model": None, "ns": {}})
        if "model_name" in item:
            t["model"] = item["model_name"]
        for ts in item.get("timestamps", []):
            t["ns"][ts["name"]] = ts["ns"]
    runs = [(t["model"], t["ns"]["COMPUTE_START"], t["ns"]["COMPUTE_END"])
            for t in by_id.values() if "COMPUTE_START" in t["ns"]]
    return sorted(runs, key=lambda r: r[1])


def send_all(server, models):
    """One request per entry of `models`, all at once; each must succeed."""
    errors = []

    def one(m):
        r = infer_fp32(server, m, np.ones((4,), dtype=np.float32))
        if r.status_code != 200:
            errors.append(r.text)

    threads = [threading.Thread(target=one, args=(m,)) for m in models]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def overlapping(runs):
    return any(b[1] < a[2] for a, b in zip(runs, runs[1:]))


def test_one_resource_runs_the_models_one_at_a_time(start_server, tmp_path):
    """r is needed once by each model's instance; by default there are as
    many as one instance needs (1), so the executions never overlap."""
    repo = tmp_path / "repo"
    model(repo, "a", [("r", 1, False)])
    model(repo, "b", [("r", 1, False)])
    path, trace = trace_args(tmp_path)
    server = start_server(repo, "--rate-limit=execution_count", *trace)
    send_all(server, ["a", "b", "a", "b"])
    assert_clean_exit(server)
    runs = executions(path)
    assert sorted(m for m, _, _ in runs) == ["a", "a", "b", "b"], runs
    assert not overlapping(runs), runs


@pytest.mark.parametrize("flags", [["--rate-limit=off"], [],
                                   ["--rate-limit=execution_count", "--rate-limit-resource=r:2"],
                                   ["--rate-limit=EXECUTION_COUNT", "--rate-limit-resource=r:2:0"]])
def test_enough_resources_or_no_rate_limiter_run_together(start_server, tmp_path, flags):
    """Off (the default), the rate_limiter is ignored; with two r, on every
    device or on device 0 (where CPU instances count), both models run at
    once: their executions overlap."""
    repo = tmp_path / "repo"
    model(repo, "a", [("r", 1, False)], delay_ms=1000)
    model(repo, "b", [("r", 1, False)], delay_ms=1000)
    path, trace = trace_args(tmp_path)
    server = start_server(repo, *(flags + trace))
    send_all(server, ["a", "b"])
    assert_clean_exit(server)
    runs = executions(path)
    assert len(runs) == 2 and overlapping(runs), runs


def test_global_resource_is_shared(start_server, tmp_path):
    repo = tmp_path / "repo"
    model(repo, "a", [("g", 2, True)])
    model(repo, "b", [("g", 2, True)])
    path, trace = trace_args(tmp_path)
    server = start_server(repo, "--rate-limit=execution_count", "--rate-limit-resource=g:3:1",
                          *trace)
    send_all(server, ["a", "b"])
    assert_clean_exit(server)
    runs = executions(path)
    assert len(runs) == 2 and not overlapping(runs), runs


def first_low_runs(priority_low, tmp_path, start_server):
    """How many of the first 10 executions were lo's, 10 requests each to
    hi (priority 1) and lo sent at once, both needing the one r."""
    repo = tmp_path / "repo"
    model(repo, "hi", [("r", 1, False)], priority=1, delay_ms=60)
    model(repo, "lo", [("r", 1, False)], priority=priority_low, delay_ms=60)
    path, trace = trace_args(tmp_path)
    server = start_server(repo, "--rate-limit=execution_count", *trace)
    send_all(server, ["hi", "lo"] * 10)
    assert_clean_exit(server)
    runs = executions(path)
    assert len(runs) == 20 and not overlapping(runs), runs
    return sum(1 for m, _, _ in runs[:10] if m == "lo"), runs


def test_priority_weights_the_executions(start_server, tmp_path):
    """Triton's rule, worked by hand: the next to run has the smallest
    executions x priority. hi (1) scores 0, 1, 2, ... and lo (4) 0, 4, 8,
    so while both wait lo runs once per four or five of hi's: 2 or 3 of
    the first 10 (which way a tie goes is Triton's heap's, or arrival)."""
    low, runs = first_low_runs(4, tmp_path, start_server)
    assert low in (2, 3), runs


def test_equal_priorities_take_turns(start_server, tmp_path):
    low, runs = first_low_runs(1, tmp_path, start_server)
    assert 4 <= low <= 6, runs


def test_rate_limiter_config_is_ignored_when_off(start_server, tmp_path):
    """A config with rate_limiter loads without the flag, as in Triton (it
    used to be refused)."""
    repo = tmp_path / "repo"
    model(repo, "a", [("r", 5, False)], priority=2, delay_ms=0)
    server = start_server(repo)
    r = infer_fp32(server, "a", np.ones((4,), dtype=np.float32))
    assert r.status_code == 200, r.text
    assert_clean_exit(server)


@pytest.mark.parametrize("resources,flags,says", [
    ([("a", [("r", 1, True)]), ("b", [("r", 1, False)])], [],
     'Resource "r" is present as both global and device-specific resource in the model '
     'configuration.'),
    ([("a", [("r", 3, False)])], ["--rate-limit-resource=r:2"],
     'Resource count for "r" is limited to 2 which will prevent scheduling of one or more '
     'model instances, the minimum required count is 3'),
    # the flag's value is lower-cased, as tritonserver's: it can not name R
    ([("a", [("R", 1, False)])], ["--rate-limit-resource=R:4"],
     'Resource count for "R" is limited to 0'),
    # a count for device 1 does not cover a CPU instance (device 0)
    ([("a", [("r", 1, False)])], ["--rate-limit-resource=r:4:1"],
     'Resource count for "r" is limited to 0'),
])
def test_unsatisfiable_resources_fail_the_load(start_server, tmp_path, resources, flags, says):
    repo = tmp_path / "repo"
    for name, res in resources:
        model(repo, name, res, delay_ms=0)
    server = start_server(repo, "--rate-limit=execution_count", "--exit-on-error=false", *flags,
                          expect_ready=False)
    index = requests.post(server.url + "/v2/repository/index", timeout=10).json()
    reasons = " ".join(m.get("reason", "") for m in index)
    assert says in reasons, index
    assert_clean_exit(server)


@pytest.mark.parametrize("flag,says", [
    ("--rate-limit=fast", "invalid argument for --rate-limit: 'fast'"),
    ("--rate-limit-resource=r", "--rate-limit-resource option format is "
                                "'<resource_name>:<count>:<device>' or '<resource_name>:<count>'. "
                                "Got r"),
    ("--rate-limit-resource=r:two", "Got r:two"),
    ("--rate-limit-resource=r:1:0:2", "Got r:1:0:2"),
    ("--rate-limit-resource=r:-1", "Got r:-1"),
])
def test_bad_flags_stop_the_start(ptserve_bin, tmp_path, flag, says):
    model(tmp_path, "a", [("r", 1, False)])
    rc, out = run_cli(ptserve_bin, "--model-repository", tmp_path, "--http-port", "0",
                      "--grpc-port", "0", "--metrics-port", "0", flag)
    assert rc != 0 and says in out, out
