"""The statistics extension (protocol-facts §1.11) and the Prometheus metrics
endpoint (triton-anchor §2.13), end to end: Triton's fields and counting
rules worked out by hand for the requests sent, the URL variants and their
errors, and /metrics parsed by prometheus_client (an independent parser)
with its counters equal to the statistics."""
import concurrent.futures as cf
import os
import socket
import subprocess
import threading
import time

import numpy as np
import pytest
import requests

from conftest import free_port, need_module
from sched_util import (DELAY_ENV, batch_sizes, identity_model, infer_fp32, model_stats,
                        output_fp32, stats, wait_pending)

prom_parser = need_module("prometheus_client.parser")

DURATIONS = ("success", "fail", "queue", "compute_input", "compute_infer", "compute_output",
             "cache_hit", "cache_miss")


def scrape(server):
    r = requests.get(server.metrics_url, timeout=10)
    assert r.status_code == 200, r.text
    assert r.headers["Content-Type"].startswith("text/plain"), r.headers
    assert "version=0.0.4" in r.headers["Content-Type"]
    families = {f.name: f for f in prom_parser.text_string_to_metric_families(r.text)}
    return families, r.text


def sample(families, family, **labels):
    """The value of the one sample of `family` whose labels include `labels`."""
    # prometheus_client strips the _total suffix only; our names have none.
    found = [s for s in families[family].samples
             if all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(found) == 1, (family, labels, families[family].samples)
    return found[0].value


@pytest.fixture
def two_models(tmp_path):
    identity_model(tmp_path, "alpha", extra="version_policy: { all { } }")
    os.makedirs(os.path.join(str(tmp_path), "alpha", "2"))
    identity_model(tmp_path, "beta", max_batch_size=0)
    return tmp_path


# ------------------------------------------------------------------ stats

def test_stats_counts_follow_triton_rules(start_server, two_models):
    server = start_server(two_models)
    before_ms = int(time.time() * 1000)
    for i in range(3):  # three requests of batch 2 on version 1
        a = np.full((2, 4), i, dtype=np.float32)
        r = infer_fp32(server, "alpha", a, version=1)
        assert r.status_code == 200, r.text
        np.testing.assert_array_equal(output_fp32(r), a)
    after_ms = int(time.time() * 1000) + 1
    doc = stats(server, "alpha", 1)
    assert list(doc) == ["model_stats"] and len(doc["model_stats"]) == 1
    st = doc["model_stats"][0]
    assert st["name"] == "alpha" and st["version"] == "1"
    assert st["inference_count"] == 6      # batch elements
    assert st["execution_count"] == 3      # no dynamic batching: one per request
    assert before_ms <= st["last_inference"] <= after_ms
    inf = st["inference_stats"]
    assert set(inf) == set(DURATIONS)
    for key in ("success", "queue", "compute_input", "compute_infer", "compute_output"):
        assert inf[key]["count"] == 3, (key, inf)
        assert inf[key]["ns"] > 0, (key, inf)
    for key in ("fail", "cache_hit", "cache_miss"):
        assert inf[key] == {"count": 0, "ns": 0}, (key, inf)
    # A request's duration includes its queue and compute times.
    assert inf["success"]["ns"] >= inf["queue"]["ns"] + inf["compute_infer"]["ns"]
    assert [b["batch_size"] for b in st["batch_stats"]] == [2]
    b = st["batch_stats"][0]
    for key in ("compute_input", "compute_infer", "compute_output"):
        assert b[key]["count"] == 3
        # one execution per request here, so the batch and request sums agree
        assert b[key]["ns"] == inf[key]["ns"]
    assert st["response_stats"] == {} and st["memory_usage"] == []
    # Version 2 has seen nothing.
    st2 = stats(server, "alpha", 2)["model_stats"][0]
    assert st2["version"] == "2" and st2["inference_count"] == 0
    assert st2["last_inference"] == 0 and st2["batch_stats"] == []


def test_stats_url_variants_and_errors(start_server, two_models):
    server = start_server(two_models)
    r = infer_fp32(server, "beta", np.arange(4, dtype=np.float32))
    assert r.status_code == 200, r.text
    every = stats(server)["model_stats"]
    assert [(s["name"], s["version"]) for s in every] == [("alpha", "1"), ("alpha", "2"),
                                                          ("beta", "1")]
    versions = stats(server, "alpha")["model_stats"]
    assert [s["version"] for s in versions] == ["1", "2"]
    beta = model_stats(server, "beta")
    assert beta["inference_count"] == 1 and beta["execution_count"] == 1  # no batching: 1
    assert batch_sizes(beta) == {1: 1}
    r = requests.get(server.url + "/v2/models/nope/stats", timeout=10)
    assert r.status_code == 400
    assert r.json() == {"error": "requested model 'nope' is not available"}
    r = requests.get(server.url + "/v2/models/alpha/versions/7/stats", timeout=10)
    assert r.status_code == 400
    assert "not available" in r.json()["error"] and "alpha" in r.json()["error"]
    r = requests.post(server.url + "/v2/models/stats", timeout=10)
    assert r.status_code == 405
    md = requests.get(server.url + "/v2", timeout=10).json()
    assert "statistics" in md["extensions"]
    assert "schedule_policy" in md["extensions"]


def test_stats_queue_count_grows(start_server, two_models):
    """perf_analyzer polls the statistics around every window and needs a
    numeric version and a growing queue count."""
    server = start_server(two_models)
    counts = []
    for i in range(3):
        r = infer_fp32(server, "alpha", np.ones((1, 4), dtype=np.float32))
        assert r.status_code == 200
        # A request without a version goes to the latest one, 2.
        latest = stats(server, "alpha", 2)["model_stats"][0]
        assert int(latest["version"]) == 2
        counts.append(latest["inference_stats"]["queue"]["count"])
    assert counts == [1, 2, 3]


# ---------------------------------------------------------------- metrics

def test_metrics_failures_and_pending(start_server, tmp_path):
    # Level 1 holds at most 2 requests; level 2 is unbounded.
    identity_model(tmp_path, "m", extra="dynamic_batching { priority_levels: 2 "
                                        "default_priority_level: 1 priority_queue_policy { "
                                        "key: 1 value: { max_queue_size: 2 } } }")
    # Held until 3 are queued: two on level 1, the third must come on level 2.
    server = start_server(tmp_path, env={DELAY_ENV: "3"})
    results = [None, None]
    threads = [threading.Thread(target=lambda i=i: results.__setitem__(
        i, infer_fp32(server, "m", np.full((1, 4), i, dtype=np.float32)))) for i in range(2)]
    for i, t in enumerate(threads):
        t.start()
        wait_pending(server, "m", i + 1)
    r = infer_fp32(server, "m", np.zeros((1, 4), dtype=np.float32))
    assert r.status_code == 503, r.text
    assert r.json()["error"].startswith("model 'm' version 1: Exceeds maximum queue size")
    fam, _ = scrape(server)
    labels = {"model": "m", "version": "1"}
    assert sample(fam, "nv_inference_pending_request_count", **labels) == 2
    assert sample(fam, "nv_inference_request_failure", reason="REJECTED", **labels) == 1
    for reason in ("CANCELED", "BACKEND", "OTHER"):
        assert sample(fam, "nv_inference_request_failure", reason=reason, **labels) == 0
    assert sample(fam, "nv_inference_request_success", **labels) == 0
    st = model_stats(server, "m")
    assert st["inference_stats"]["fail"]["count"] == 1
    # A level-2 request releases the hold; all three accepted ones succeed.
    r = infer_fp32(server, "m", np.ones((1, 4), dtype=np.float32), priority=2)
    assert r.status_code == 200, r.text
    for t in threads:
        t.join(30)
    assert [x.status_code for x in results] == [200, 200]
    fam, _ = scrape(server)
    assert sample(fam, "nv_inference_request_success", **labels) == 3
    assert sample(fam, "nv_inference_pending_request_count", **labels) == 0


def test_metrics_counters_equal_stats(start_server, tmp_path):
    identity_model(tmp_path, "m", extra="dynamic_batching { preferred_batch_size: [ 2 ] }")
    server = start_server(tmp_path, env={DELAY_ENV: "4"})
    with cf.ThreadPoolExecutor(4) as pool:
        futs = [pool.submit(infer_fp32, server, "m", np.full((1, 4), i, dtype=np.float32))
                for i in range(4)]
        assert [f.result(30).status_code for f in futs] == [200] * 4
    st = model_stats(server, "m")
    fam, text = scrape(server)
    labels = {"model": "m", "version": "1"}
    inf = st["inference_stats"]
    assert st["execution_count"] == 2 and st["inference_count"] == 4  # 2 batches of 2
    assert sample(fam, "nv_inference_request_success", **labels) == inf["success"]["count"] == 4
    assert sample(fam, "nv_inference_count", **labels) == st["inference_count"]
    assert sample(fam, "nv_inference_exec_count", **labels) == st["execution_count"]
    assert sample(fam, "nv_inference_request_duration_us", **labels) == inf["success"]["ns"] // 1000
    assert sample(fam, "nv_inference_queue_duration_us", **labels) == inf["queue"]["ns"] // 1000
    for part in ("input", "infer", "output"):
        assert (sample(fam, "nv_inference_compute_%s_duration_us" % part, **labels)
                == inf["compute_" + part]["ns"] // 1000)
    assert sample(fam, "nv_inference_pending_request_count", **labels) == 0
    for name in ("nv_inference_request_success", "nv_inference_request_failure",
                 "nv_inference_count", "nv_inference_exec_count",
                 "nv_inference_request_duration_us", "nv_inference_queue_duration_us",
                 "nv_inference_compute_input_duration_us",
                 "nv_inference_compute_infer_duration_us",
                 "nv_inference_compute_output_duration_us"):
        assert fam[name].type == "counter", name
        assert "# HELP %s " % name in text
    assert fam["nv_inference_pending_request_count"].type == "gauge"
    # CPU and memory gauges against /proc/meminfo (MemTotal is fixed).
    with open("/proc/meminfo") as f:
        total_kb = int([l for l in f if l.startswith("MemTotal:")][0].split()[1])
    assert sample(fam, "nv_cpu_memory_total_bytes") == total_kb * 1024
    assert 0 < sample(fam, "nv_cpu_memory_used_bytes") < total_kb * 1024
    assert 0.0 <= sample(fam, "nv_cpu_utilization") <= 1.0


def test_metrics_flags(start_server, tmp_path, ptserve_bin):
    identity_model(tmp_path, "m")
    server = start_server(tmp_path, "--allow-cpu-metrics", "false")
    fam, text = scrape(server)
    assert "nv_cpu_utilization" not in text and "nv_inference_count" in fam
    r = requests.get(server.metrics_url.replace("/metrics", "/other"), timeout=10)
    assert r.status_code == 404
    assert "Started Metrics Service at 127.0.0.1:%d" % server.metrics_port in server.log()
    server.stop()

    server = start_server(tmp_path, "--allow-metrics", "false")
    with pytest.raises(requests.ConnectionError):
        requests.get(server.metrics_url, timeout=5)
    server.stop()

    # A metrics port that is taken fails start-up, as in tritonserver.
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        p = subprocess.run([ptserve_bin, "--model-repository", str(tmp_path),
                            "--http-port", str(free_port()), "--http-address", "127.0.0.1",
                            "--metrics-port", str(port)],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
    out = p.stdout.decode(errors="replace")
    assert p.returncode != 0, out
    assert "Metrics" in out and str(port) in out, out


def nvml_loads():
    """Whether this host has an NVIDIA driver's NVML (ctypes, independent of
    ptserve)."""
    import ctypes
    try:
        ctypes.CDLL("libnvidia-ml.so.1")
        return True
    except OSError:
        return False


GPU_LINE = "GPU metrics: none collected (nv_gpu_* left out): "


def test_gpu_metrics_flags(start_server, tmp_path, ptserve_bin):
    """--allow-gpu-metrics takes a boolean (default true) and
    --metrics-interval-ms samples often; where NVML can not be loaded
    (PTSERVE_NVML_LIBRARY points at a missing library, the case of a CPU
    host) the server logs one line saying so, serves on, and /metrics has no
    nv_gpu_* family. With the flag false nothing is attempted."""
    identity_model(tmp_path, "m")
    missing = str(tmp_path / "no-such-dir" / "libnvidia-ml.so.1")
    server = start_server(tmp_path, "--metrics-interval-ms", "20",
                          env={"PTSERVE_NVML_LIBRARY": missing})
    for _ in range(5):  # the sampling timer runs meanwhile, every 20 ms
        assert infer_fp32(server, "m", np.ones((1, 4), np.float32)).status_code == 200
        fam, text = scrape(server)
    assert "nv_gpu_" not in text and "nv_energy_consumption" not in text
    lines = [l for l in server.log().splitlines() if GPU_LINE in l]
    assert len(lines) == 1, server.log()
    assert "NVML is not available" in lines[0] and missing in lines[0], lines[0]
    assert server.alive()
    server.stop()

    server = start_server(tmp_path, "--allow-gpu-metrics=false",
                          env={"PTSERVE_NVML_LIBRARY": missing})
    fam, text = scrape(server)
    assert "nv_gpu_" not in text and "GPU metrics" not in server.log()
    server.stop()

    # The default library name: on a host without a driver the same line,
    # naming libnvidia-ml.so.1; on a GPU host the gauges (tests/gpu checks them).
    server = start_server(tmp_path)
    fam, text = scrape(server)
    if nvml_loads():
        assert "nv_gpu_memory_total_bytes{gpu_uuid=" in text, text
    else:
        assert "nv_gpu_" not in text
        assert GPU_LINE in server.log() and "libnvidia-ml.so.1" in server.log(), server.log()
    server.stop()

    for bad in ("maybe", ""):
        p = subprocess.run([ptserve_bin, "--model-repository", str(tmp_path),
                            "--allow-gpu-metrics", bad], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=60)
        out = p.stdout.decode(errors="replace")
        assert p.returncode != 0 and "--allow-gpu-metrics" in out, out


def test_gpu_metrics_through_a_fake_nvml(start_server, tmp_path, ptserve_bin):
    """The whole NVML path on a CPU host: PTSERVE_NVML_LIBRARY loads the
    build's stand-in library (tests/unit/metrics/fake_nvml.c, two GPUs with
    fixed values, no power-limit function), and /metrics shows its values
    under tritonserver's names and gpu_uuid label, sampled every
    --metrics-interval-ms (its energy counter grows 1 J per sample)."""
    fake = os.path.join(os.path.dirname(ptserve_bin), "libfake_nvml.so")
    assert os.path.exists(fake), "the build makes %s (CMake target fake_nvml)" % fake
    identity_model(tmp_path, "m")
    server = start_server(tmp_path, "--metrics-interval-ms", "20",
                          env={"PTSERVE_NVML_LIBRARY": fake})
    fam, text = scrape(server)
    for i, util, used_gib, watts in ((0, 0.37, 1, 71.5), (1, 1.0, 2, 72.5)):
        uuid = "GPU-fake-%d" % i
        assert sample(fam, "nv_gpu_utilization", gpu_uuid=uuid) == util
        assert sample(fam, "nv_gpu_memory_total_bytes", gpu_uuid=uuid) == 80 * 2**30
        assert sample(fam, "nv_gpu_memory_used_bytes", gpu_uuid=uuid) == used_gib * 2**30
        assert sample(fam, "nv_gpu_power_usage", gpu_uuid=uuid) == watts
        assert fam["nv_gpu_utilization"].type == "gauge"
        assert "Collecting metrics for GPU %d: Fake GPU %d" % (i, i) in server.log()
    assert "nv_gpu_power_limit" not in text  # NVML gave none: left out, not 0
    deadline = time.time() + 30
    while sample(scrape(server)[0], "nv_energy_consumption", gpu_uuid="GPU-fake-0") < 2.0:
        assert time.time() < deadline, "the GPU samples were not refreshed"
        time.sleep(0.02)
    assert "GPU metrics: none collected" not in server.log()
    server.stop()
