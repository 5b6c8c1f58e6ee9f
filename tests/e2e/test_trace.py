"""Request tracing (Triton's trace extension), end to end over HTTP.

Expected settings come from Triton's own trace endpoint tests (qa/L0_trace:
the same update/clear sequence and the same answers) and its documented
defaults; traces are parsed back from the files ptserve writes: valid JSON,
every traced request with all its timestamps, in the order a request meets
them (receive, request start, queue, compute start, input end, output start,
compute end, request end, send). Which requests are traced follows Triton's
rule (every rate-th request, at most count), computed here.
"""
import json
import os
import signal

import requests

from conftest import ROOT, assert_no_sanitizer_report

REPO = os.path.join(ROOT, "tests", "e2e", "repos", "identity")
TIMEOUT = 10

# The order in which a request meets the points (trace.md).
ORDER = ["HTTP_RECV_START", "HTTP_RECV_END", "REQUEST_START", "QUEUE_START", "COMPUTE_START",
         "COMPUTE_INPUT_END", "COMPUTE_OUTPUT_START", "COMPUTE_END", "REQUEST_END",
         "HTTP_SEND_START", "HTTP_SEND_END"]


def infer(server, rid, data=(1.0, 2.0, 3.0, 4.0), model="id_fp32"):
    body = {"id": rid, "inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 4],
                                   "data": list(data)}]}
    r = requests.post(server.url + "/v2/models/%s/infer" % model, json=body, timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    return r.json()


def stop_clean(server):
    assert server.stop() == 0, server.log()
    assert_no_sanitizer_report(server.log())


def load_traces(path):
    """{id: {"header": {...}, "timestamps": [...], "tensors": [...]}}"""
    with open(path) as f:
        items = json.load(f)
    assert isinstance(items, list)
    traces = {}
    for item in items:
        t = traces.setdefault(item["id"], {"header": None, "timestamps": [], "tensors": []})
        if "model_name" in item:
            t["header"] = item
        if "timestamps" in item:
            t["timestamps"] += item["timestamps"]
        if "activity" in item:
            t["tensors"].append(item)
    return traces


def settings(server, model=None, body=None):
    path = "/v2/models/%s/trace/setting" % model if model else "/v2/trace/setting"
    if body is None:
        return requests.get(server.url + path, timeout=TIMEOUT)
    return requests.post(server.url + path, data=json.dumps(body), timeout=TIMEOUT)


def test_trace_settings_like_triton(start_server, tmp_path):
    trace_file = str(tmp_path / "global_unittest.log")
    server = start_server(REPO, "--trace-config", "triton,file=" + trace_file,
                          "--trace-config", "level=TIMESTAMPS", "--trace-config", "rate=1")
    initial = {"trace_file": trace_file, "trace_level": ["TIMESTAMPS"], "trace_rate": "1",
               "trace_count": "-1", "log_frequency": "0", "trace_mode": "triton"}
    assert settings(server).json() == initial
    # Per model: the same, plus ptserve's profile_executions extension.
    assert settings(server, "id_fp32").json() == dict(initial, profile_executions="0")

    # trace_file can not be changed over the network (Triton's text, 501).
    r = settings(server, "id_fp32", {"trace_file": "model.log"})
    assert r.status_code == 501
    assert r.json() == {"error": "trace file location can not be updated through network protocol"}

    # A global update reaches the model fields that were not set for it.
    both = dict(initial, trace_level=["TIMESTAMPS", "TENSORS"])
    assert settings(server, body={"trace_level": ["TIMESTAMPS", "TENSORS"]}).json() == both
    assert settings(server, "id_fp32").json() == dict(both, profile_executions="0")
    assert settings(server, body={"trace_level": ["TIMESTAMPS"]}).status_code == 200

    # qa/L0_trace test_http_clear_settings.
    settings(server, "id_fp32", {"trace_rate": "12", "log_frequency": "34"})
    settings(server, body={"trace_rate": "56", "trace_count": "78", "trace_level": ["OFF"]})
    expected_global = dict(initial, trace_level=["OFF"])
    r = settings(server, body={"trace_rate": None, "trace_count": None})
    assert r.json() == expected_global
    assert settings(server, "id_fp32").json() == dict(
        initial, trace_level=["OFF"], trace_rate="12", log_frequency="34", profile_executions="0")
    r = settings(server, "id_fp32", {"trace_rate": None, "trace_level": None})
    assert r.json() == dict(initial, trace_level=["OFF"], log_frequency="34",
                            profile_executions="0")
    assert settings(server).json() == expected_global
    # An empty object for a model removes its settings (Triton's extension doc).
    assert settings(server, "id_fp32", {}).json() == dict(expected_global, profile_executions="0")

    # Errors name what was wrong; nothing changes.
    r = settings(server, "nope")
    assert r.status_code == 400 and "Request for unknown model : nope" in r.json()["error"]
    for bad, word in [({"trace_rate": "0"}, "trace_rate"), ({"trace_level": ["LOUD"]}, "LOUD"),
                      ({"trace_count": "-5"}, "trace_count"), ({"bogus": "1"}, "bogus"),
                      ({"trace_rate": ["1", "2"]}, "trace_rate"),
                      ({"profile_executions": "2"}, "per-model")]:
        r = settings(server, body=bad)
        assert r.status_code == 400 and word in r.json()["error"], (bad, r.text)
    r = requests.post(server.url + "/v2/trace/setting", data="{", timeout=TIMEOUT)
    assert r.status_code == 400
    assert settings(server).json() == expected_global
    # No /versions/ segment on this route (protocol-facts §1.1); other methods: 405.
    assert requests.get(server.url + "/v2/models/id_fp32/versions/1/trace/setting",
                        timeout=TIMEOUT).status_code == 404
    assert requests.put(server.url + "/v2/trace/setting", timeout=TIMEOUT).status_code == 405
    assert "trace" in requests.get(server.url + "/v2", timeout=TIMEOUT).json()["extensions"]
    stop_clean(server)


def test_trace_timestamps_in_order(start_server, tmp_path):
    trace_file = str(tmp_path / "trace.json")
    server = start_server(REPO, "--trace-config", "triton,file=" + trace_file,
                          "--trace-config", "level=TIMESTAMPS", "--trace-config", "rate=1")
    ids = ["req-%d" % i for i in range(6)]
    for rid in ids:
        infer(server, rid)
    # log_frequency 0: Triton writes the file at shutdown.
    assert not os.path.exists(trace_file)
    stop_clean(server)
    traces = load_traces(trace_file)
    assert len(traces) == len(ids)
    assert sorted(t["header"]["request_id"] for t in traces.values()) == sorted(ids)
    for tid, t in traces.items():
        assert t["header"]["model_name"] == "id_fp32"
        assert t["header"]["model_version"] == 1
        names = [s["name"] for s in t["timestamps"]]
        for point in ORDER:
            assert point in names, (tid, names)
        ns = {s["name"]: s["ns"] for s in t["timestamps"]}
        for a, b in zip(ORDER, ORDER[1:]):
            assert ns[a] <= ns[b], (tid, a, b, ns)
        # Taken in time order, as listed.
        stamps = [s["ns"] for s in t["timestamps"]]
        assert stamps == sorted(stamps)

    with open(trace_file + ".chrome.json") as f:
        chrome = json.load(f)
    slices = [e for e in chrome["traceEvents"] if e["ph"] == "X"]
    per_row = {}
    for e in slices:
        assert e["dur"] >= 0
        per_row.setdefault(e["tid"], {})[e["name"]] = e
    assert set(per_row) == set(traces)
    for tid, row in per_row.items():
        for phase in ("HTTP receive", "request", "queue", "compute", "compute input",
                      "compute infer", "compute output", "HTTP send"):
            assert phase in row, (tid, sorted(row))
        # The request slice holds the queue and compute slices (a proper nest).
        req, comp = row["request"], row["compute"]
        assert req["ts"] <= row["queue"]["ts"]
        assert comp["ts"] + comp["dur"] <= req["ts"] + req["dur"] + 0.001
        # Slices are the differences of the Triton timestamps, in microseconds.
        ns = {s["name"]: s["ns"] for s in traces[tid]["timestamps"]}
        assert abs(row["queue"]["dur"] - (ns["COMPUTE_START"] - ns["QUEUE_START"]) / 1000) < 0.002


def test_trace_rate_count_and_log_frequency(start_server, tmp_path):
    trace_file = str(tmp_path / "t.json")
    server = start_server(REPO, "--trace-config", "triton,file=" + trace_file,
                          "--trace-config", "level=TIMESTAMPS", "--trace-config", "rate=2",
                          "--trace-config", "count=3", "--trace-config", "log-frequency=2")
    for i in range(1, 11):
        infer(server, "r%d" % i)
    # Every 2nd request, 3 in all: r2, r4, r6. Two of them fill <file>.0 at
    # once; the third is written to <file>.1 at shutdown.
    assert settings(server).json()["trace_count"] == "0"
    stop_clean(server)
    first = load_traces(trace_file + ".0")
    second = load_traces(trace_file + ".1")
    assert sorted(t["header"]["request_id"] for t in first.values()) == ["r2", "r4"]
    assert [t["header"]["request_id"] for t in second.values()] == ["r6"]
    assert not os.path.exists(trace_file + ".2")
    assert not os.path.exists(trace_file)


def test_trace_per_model_and_tensors(start_server, tmp_path):
    trace_file = str(tmp_path / "t.json")
    server = start_server(REPO, "--trace-config", "triton,file=" + trace_file)
    # Globally OFF; only id_fp32 is traced, with its tensors.
    r = settings(server, "id_fp32", {"trace_level": ["TIMESTAMPS", "TENSORS"], "trace_rate": "1"})
    assert r.status_code == 200, r.text
    infer(server, "traced", data=(1.0, 2.5, -3.0, 0.25))
    r = requests.post(server.url + "/v2/models/dt_fp32/infer", timeout=TIMEOUT, json={
        "id": "other-model", "inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 2],
                                         "data": [1, 2]}]})
    assert r.status_code == 200, r.text
    stop_clean(server)
    traces = load_traces(trace_file)
    assert [t["header"]["request_id"] for t in traces.values()] == ["traced"]
    (t,) = traces.values()
    by_activity = {x["activity"]: x["tensor"] for x in t["tensors"]}
    assert by_activity["TENSOR_QUEUE_INPUT"] == {"name": "INPUT0", "data": "1,2.5,-3,0.25",
                                                  "shape": "1,4", "dtype": "FP32"}
    # The identity model echoes its input.
    assert by_activity["TENSOR_BACKEND_OUTPUT"] == {"name": "OUTPUT0", "data": "1,2.5,-3,0.25",
                                                     "shape": "1,4", "dtype": "FP32"}


def test_trace_deprecated_flags_and_bad_config(ptserve_bin, start_server, tmp_path):
    import subprocess
    trace_file = str(tmp_path / "old.json")
    server = start_server(REPO, "--trace-file", trace_file, "--trace-level", "TIMESTAMPS",
                          "--trace-rate", "1")
    s = settings(server).json()
    assert s["trace_file"] == trace_file and s["trace_level"] == ["TIMESTAMPS"]
    infer(server, "x")
    server.stop(signal.SIGINT)
    assert len(load_traces(trace_file)) == 1
    for bad in (["--trace-config", "level=LOUD"], ["--trace-config", "opentelemetry,url=x"],
                ["--trace-config", "rate=0"]):
        p = subprocess.run([ptserve_bin, "--model-repository", REPO] + bad,
                           capture_output=True, text=True, timeout=30)
        assert p.returncode == 1 and bad[1] in p.stderr, (bad, p.stderr)


def test_trace_tensors_any_bytes_yield_valid_json(start_server, tmp_path):
    """A BYTES tensor may hold any bytes: a NUL, quotes, control characters,
    bytes that are not UTF-8. The trace file must still be UTF-8 JSON that a
    strict reader takes, holding every element: each byte that does not
    start a well-formed UTF-8 sequence becomes U+FFFD. The expected text is
    Python's own UTF-8 decoder with errors="replace" (for these inputs its
    maximal-subpart rule and a per-byte rule agree)."""
    elements = [b"a\x00b", b'q"uote\\back\nline\t', b"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80",
                b"\xed\xa0\x80", b"\xc0\xaf", b"\xff", b"\x80x", b""]
    trace_file = str(tmp_path / "t.json")
    server = start_server(REPO, "--trace-config", "triton,file=" + trace_file)
    r = settings(server, "dt_bytes", {"trace_level": ["TIMESTAMPS", "TENSORS"], "trace_rate": "1"})
    assert r.status_code == 200, r.text
    raw = b"".join(len(e).to_bytes(4, "little") + e for e in elements)
    header = json.dumps({"id": "bytes", "inputs": [
        {"name": "INPUT0", "datatype": "BYTES", "shape": [1, len(elements)],
         "parameters": {"binary_data_size": len(raw)}}],
        "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}]}).encode()
    r = requests.post(server.url + "/v2/models/dt_bytes/infer", data=header + raw, timeout=TIMEOUT,
                      headers={"Inference-Header-Content-Length": str(len(header))})
    assert r.status_code == 200, r.text
    stop_clean(server)
    with open(trace_file, encoding="utf-8") as f:  # strict: invalid UTF-8 raises
        items = json.load(f)
    tensors = {x["activity"]: x["tensor"] for x in items if "activity" in x}
    want = ",".join(e.decode("utf-8", errors="replace") for e in elements)
    assert tensors["TENSOR_QUEUE_INPUT"] == {"name": "INPUT0", "data": want,
                                             "shape": "1,%d" % len(elements), "dtype": "BYTES"}
    assert tensors["TENSOR_BACKEND_OUTPUT"]["data"] == want
