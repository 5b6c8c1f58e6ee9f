"""--metrics-config, with tritonserver r25.07's settings and meaning
(core/src/metric_model_reporter.cc): summary_latencies adds the
nv_inference_*_summary_us summaries, summary_quantiles picks their
quantiles, counter_latencies=false drops the latency counters,
histogram_latencies adds nothing outside decoupled models. /metrics is
parsed by prometheus_client (an independent parser); the expected values
come from the requests the test sends: the identity model sleeps a known
time per batch item, and the test times each request itself, so every
server-side duration lies between the sleep and the latency the client saw
(and so does every order statistic of them)."""
import math
import random
import time

import numpy as np
import pytest
import requests

from conftest import assert_clean_exit, need_module, run_cli
from sched_util import identity_model, infer_fp32

prom_parser = need_module("prometheus_client.parser")

DELAY_MS = 20  # the identity model's sleep per batch item
DEFAULT_QUANTILES = [(0.5, 0.05), (0.9, 0.01), (0.95, 0.001), (0.99, 0.001), (0.999, 0.001)]
LATENCY_COUNTERS = ("nv_inference_request_duration_us", "nv_inference_queue_duration_us",
                    "nv_inference_compute_input_duration_us",
                    "nv_inference_compute_infer_duration_us",
                    "nv_inference_compute_output_duration_us")
SUMMARIES = ("nv_inference_request_summary_us", "nv_inference_queue_summary_us",
             "nv_inference_compute_input_summary_us", "nv_inference_compute_infer_summary_us",
             "nv_inference_compute_output_summary_us")


def scrape(server):
    r = requests.get(server.metrics_url, timeout=10)
    assert r.status_code == 200, r.text
    return {f.name: f for f in prom_parser.text_string_to_metric_families(r.text)}, r.text


def summary(families, name, model="m"):
    """(count, sum, {quantile: value}) of one model's summary `name`."""
    fam = families[name]
    assert fam.type == "summary", fam
    count = total = None
    quantiles = {}
    for s in fam.samples:
        if s.labels.get("model") != model:
            continue
        assert s.labels["version"] == "1", s
        if s.name == name + "_count":
            count = s.value
        elif s.name == name + "_sum":
            total = s.value
        else:
            assert s.name == name, s
            quantiles[float(s.labels["quantile"])] = s.value
    return count, total, quantiles


def send_timed(server, sizes):
    """Sends one request per batch size, one after the other; the
    latency the client saw for each, in µs."""
    latencies = []
    for i, b in enumerate(sizes):
        a = np.full((b, 4), i, dtype=np.float32)
        t0 = time.perf_counter_ns()
        r = infer_fp32(server, "m", a)
        latencies.append((time.perf_counter_ns() - t0) / 1000.0)
        assert r.status_code == 200, r.text
    return latencies


def rank_range(q, e, n):
    """The 1-based ranks a CKMS estimate of quantile q with error e may
    have among n values, one rank of rounding to spare on each side."""
    lo = max(1, math.floor(q * n - e * n) - 1)
    hi = min(n, math.ceil(q * n + e * n) + 1)
    return lo, hi


def assert_bounded(quantiles, floors, ceilings, targets=DEFAULT_QUANTILES):
    """Each estimate lies between the order statistics of the per-request
    lower and upper bounds at the ranks its error allows: if x_i <= v_i <=
    y_i for every request, the k-th smallest v lies between the k-th
    smallest x and the k-th smallest y."""
    floors, ceilings = sorted(floors), sorted(ceilings)
    n = len(floors)
    assert sorted(quantiles) == [q for q, _ in targets], quantiles
    for q, e in targets:
        lo, hi = rank_range(q, e, n)
        assert floors[lo - 1] <= quantiles[q] <= ceilings[hi - 1], (q, quantiles, floors,
                                                                     ceilings)


def test_summaries_are_bounded_by_what_the_client_measured(start_server, tmp_path):
    identity_model(tmp_path, "m", params={"execute_delay_ms_per_item": DELAY_MS})
    server = start_server(tmp_path, "--metrics-config", "summary_latencies=true")
    # 12 requests of batch 1 (20 ms) and 8 of batch 5 (100 ms): the median is
    # a short one, the 90th percentile and above a long one.
    sizes = [1] * 12 + [5] * 8
    random.Random(7).shuffle(sizes)
    latencies = send_timed(server, sizes)
    sleeps = [b * DELAY_MS * 1000.0 for b in sizes]
    families, text = scrape(server)
    n = len(sizes)
    for name in SUMMARIES:
        count, total, quantiles = summary(families, name)
        assert count == n, (name, text)
        assert 0 <= total <= sum(latencies), (name, total, latencies)
        floors = sleeps if name in ("nv_inference_request_summary_us",
                                    "nv_inference_compute_infer_summary_us") else [0.0] * n
        assert sum(floors) <= total, (name, total)
        assert_bounded(quantiles, floors, latencies)
    _, _, infer = summary(families, "nv_inference_compute_infer_summary_us")
    assert infer[0.5] < 5 * DELAY_MS * 1000 <= infer[0.9], infer
    # The counters stay (counter_latencies defaults to true) and are the sums.
    for name in LATENCY_COUNTERS:
        assert name in families, name
    assert families["nv_inference_request_success"].samples[0].value == n
    # The summaries' families come with Triton's help texts.
    assert ("# HELP nv_inference_queue_summary_us Summary of inference queuing duration in "
            "microseconds (includes cached requests)\n") in text
    assert_clean_exit(server)



def test_no_summaries_by_default(start_server, tmp_path):
    identity_model(tmp_path, "m")
    server = start_server(tmp_path)
    send_timed(server, [1, 2])
    families, _ = scrape(server)
    for name in SUMMARIES:
        assert name not in families, name
    for name in LATENCY_COUNTERS:
        assert families[name].samples[0].labels["model"] == "m", name
    assert_clean_exit(server)



def test_custom_quantiles(start_server, tmp_path):
    identity_model(tmp_path, "m", params={"execute_delay_ms_per_item": DELAY_MS})
    targets = [(0.25, 0.01), (0.75, 0.01)]
    server = start_server(tmp_path, "--metrics-config=summary_latencies=true",
                          "--metrics-config=summary_quantiles=0.25:0.01,0.75:0.01")
    sizes = [1, 3, 1, 3, 1, 3, 1, 3]
    latencies = send_timed(server, sizes)
    families, text = scrape(server)
    assert 'quantile="0.25"' in text and 'quantile="0.75"' in text and \
        'quantile="0.5"' not in text, text
    count, _, quantiles = summary(families, "nv_inference_compute_infer_summary_us")
    assert count == len(sizes)
    assert_bounded(quantiles, [b * DELAY_MS * 1000.0 for b in sizes], latencies, targets)
    assert_clean_exit(server)



def test_counter_latencies_false_drops_the_latency_counters(start_server, tmp_path):
    identity_model(tmp_path, "m")
    server = start_server(tmp_path, "--metrics-config", "counter_latencies=false")
    send_timed(server, [1, 1, 1])
    families, text = scrape(server)
    for name in LATENCY_COUNTERS + SUMMARIES:
        assert name not in families, (name, text)
    # The counts are not latencies: they stay.
    for name in ("nv_inference_request_success", "nv_inference_count",
                 "nv_inference_exec_count"):
        assert families[name].samples[0].value == 3, (name, text)
    assert_clean_exit(server)



def test_summaries_of_a_caching_model(start_server, tmp_path):
    """Triton leaves the request summary out of a model that caches and
    adds the cache hit and miss summaries: one miss, then two hits."""
    identity_model(tmp_path, "m", extra="response_cache { enable: true }")
    server = start_server(tmp_path, "--metrics-config=summary_latencies=true",
                          "--cache-config", "local,size=1048576")
    a = np.ones((1, 4), dtype=np.float32)
    for _ in range(3):
        r = infer_fp32(server, "m", a)
        assert r.status_code == 200, r.text
    families, text = scrape(server)
    assert "nv_inference_request_summary_us" not in families, text
    assert summary(families, "nv_cache_miss_summary_per_model")[0] == 1, text
    assert summary(families, "nv_cache_hit_summary_per_model")[0] == 2, text
    assert summary(families, "nv_inference_queue_summary_us")[0] == 3, text
    assert summary(families, "nv_inference_compute_infer_summary_us")[0] == 1, text
    assert_clean_exit(server)



def test_histogram_latencies_adds_nothing_without_decoupled_models(start_server, tmp_path):
    """r25.07's one latency histogram, nv_inference_first_response_histogram_ms,
    exists for decoupled models only; ptserve loads none."""
    identity_model(tmp_path, "m")
    server = start_server(tmp_path, "--metrics-config=histogram_latencies=true")
    send_timed(server, [1])
    families, text = scrape(server)
    assert not [f for f in families.values() if f.type == "histogram"], text
    assert "nv_inference_request_duration_us" in families
    assert_clean_exit(server)



@pytest.mark.parametrize("value,says", [
    ("summary_latencies", "--metrics-config option format is <setting>=<value>. Got "
                          "summary_latencies"),
    ("counter_latencies=yes", "--metrics-config counter_latencies must be true or false, "
                              "got 'yes'"),
    ("histogram_latencies=1", "histogram_latencies must be true or false"),
    ("summary_quantiles=0.5,0.9", "summary_quantiles: '0.5' is not <quantile>:<error>"),
    ("summary_quantiles=0.5:0.05,1.5:0.01", "summary_quantiles: '1.5:0.01' needs a quantile"),
    ("summary_max_age=30", "unknown setting 'summary_max_age'"),
    ("gpu_metrics=false", "unknown setting 'gpu_metrics'"),
])
def test_bad_settings_stop_the_start(ptserve_bin, tmp_path, value, says):
    identity_model(tmp_path, "m")
    rc, out = run_cli(ptserve_bin, "--model-repository", tmp_path, "--http-port", "0",
                      "--grpc-port", "0", "--metrics-port", "0", "--metrics-config", value)
    assert rc != 0, out
    assert says in out, out
    assert "Started" not in out, out
