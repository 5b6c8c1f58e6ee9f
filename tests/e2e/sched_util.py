"""Helpers for the scheduler, statistics and metrics tests
(test_batching.py, test_stats_metrics.py): write identity model repositories
into a temporary directory, send inferences, read /stats and /metrics."""
import json
import os
import re
import time

import numpy as np
import requests

TIMEOUT = 30
DELAY_ENV = "PTSERVE_DELAY_SCHEDULER"


def identity_model(root, name, dtype="TYPE_FP32", dims=(4,), max_batch_size=8, extra="",
                   params=None):
    """Writes <root>/<name>/config.pbtxt (+ version 1) for an identity model:
    OUTPUT0 echoes INPUT0. `extra` is appended to the config verbatim
    (dynamic_batching, instance_group, ...); `params` become string
    parameters (execute_delay_ms, ...)."""
    d = os.path.join(str(root), name)
    os.makedirs(os.path.join(d, "1"), exist_ok=True)
    dims_s = ", ".join(str(x) for x in dims)
    text = ('name: "%s"\nbackend: "identity"\nmax_batch_size: %d\n'
            'input [ { name: "INPUT0" data_type: %s dims: [ %s ] } ]\n'
            'output [ { name: "OUTPUT0" data_type: %s dims: [ %s ] } ]\n'
            % (name, max_batch_size, dtype, dims_s, dtype, dims_s))
    for k, v in (params or {}).items():
        text += 'parameters { key: "%s" value: { string_value: "%s" } }\n' % (k, v)
    text += extra + "\n"
    with open(os.path.join(d, "config.pbtxt"), "w") as f:
        f.write(text)
    return d


def infer_fp32(server, model, arr, priority=None, timeout_us=None, version=None):
    """POSTs one FP32 input as JSON; returns the requests.Response."""
    body = {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": list(arr.shape),
                        "data": arr.flatten().tolist()}]}
    params = {}
    if priority is not None:
        params["priority"] = priority
    if timeout_us is not None:
        params["timeout"] = timeout_us
    if params:
        body["parameters"] = params
    path = "/v2/models/%s%s/infer" % (model, "/versions/%d" % version if version else "")
    return requests.post(server.url + path, data=json.dumps(body), timeout=TIMEOUT)


def output_fp32(resp):
    out = resp.json()["outputs"][0]
    return np.array(out["data"], dtype=np.float32).reshape(out["shape"])


def infer_bytes(server, model, rows):
    """rows: list of lists of str (one list per batch row); returns Response."""
    flat = [s for row in rows for s in row]
    body = {"inputs": [{"name": "INPUT0", "datatype": "BYTES",
                        "shape": [len(rows), len(rows[0])], "data": flat}]}
    return requests.post(server.url + "/v2/models/%s/infer" % model, data=json.dumps(body),
                         timeout=TIMEOUT)


def stats(server, model=None, version=None):
    """The statistics document (GET /v2/models[/m[/versions/v]]/stats)."""
    path = "/v2/models/stats" if model is None else "/v2/models/%s%s/stats" % (
        model, "/versions/%d" % version if version is not None else "")
    r = requests.get(server.url + path, timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    return r.json()


def model_stats(server, model):
    doc = stats(server, model)
    assert len(doc["model_stats"]) == 1, doc
    return doc["model_stats"][0]


def batch_sizes(st):
    """{batch_size: execution count} from a model's batch_stats."""
    return {b["batch_size"]: b["compute_infer"]["count"] for b in st["batch_stats"]}


SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$')


def metric_value(server, name, model):
    """The value of `name{model="<model>",...}` on /metrics (first match)."""
    text = requests.get(server.metrics_url, timeout=TIMEOUT).text
    for line in text.splitlines():
        m = SAMPLE.match(line)
        if m and m.group(1) == name and ('model="%s"' % model) in (m.group(2) or ""):
            return float(m.group(3))
    raise AssertionError("%s for model %s not in /metrics:\n%s" % (name, model, text))


def wait_pending(server, model, n, timeout=20):
    """Waits until `n` requests of `model` are queued (the pending gauge), so
    the next request is known to arrive after them."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if metric_value(server, "nv_inference_pending_request_count", model) == n:
            return
        time.sleep(0.01)
    raise AssertionError("model %s never had %d pending requests" % (model, n))
