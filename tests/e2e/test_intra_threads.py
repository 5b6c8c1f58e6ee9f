"""LibTorch's intra-op threads per model instance (issue #13, part 5).

Without INTRA_OP_THREAD_COUNT each instance uses max(1, cores / instances)
threads, at most LibTorch's own default (OMP_NUM_THREADS when set, else the
cores), so that a model's concurrent forward() calls do not ask for more
threads than the machine has; INTRA_OP_THREAD_COUNT still wins. ptserve logs
the value once per instance. The expected values are computed here from
this process's CPU affinity (the server inherits it), not read back from
the server; every model must still answer correctly.
"""
import io
import os
import re

import pytest
import requests
import torch

from conftest import assert_clean_exit

TIMEOUT = 60


class Scale(torch.nn.Module):
    def forward(self, x):
        return x * 2.0 + 0.5


def config(name, count, intra=None):
    params = ""
    if intra is not None:
        params = 'parameters: { key: "INTRA_OP_THREAD_COUNT" value: { string_value: "%d" } }\n' % intra
    return ('name: "%s"\nbackend: "pytorch"\nmax_batch_size: 8\n'
            'input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
            'output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
            'instance_group [ { count: %d kind: KIND_CPU } ]\n%s' % (name, count, params))


def cores():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count()


def libtorch_default():
    omp = os.environ.get("OMP_NUM_THREADS", "")
    return int(omp) if omp.isdigit() and int(omp) > 0 else cores()


def expected_default(count):
    return max(1, min(libtorch_default(), cores() // count))


MODELS = {"one": (1, None), "two": (2, None), "three": (3, None), "chosen": (2, 3)}


@pytest.fixture
def repo(tmp_path):
    buf = io.BytesIO()
    torch.jit.save(torch.jit.script(Scale()), buf)
    for name, (count, intra) in MODELS.items():
        os.makedirs(tmp_path / name / "1")
        (tmp_path / name / "config.pbtxt").write_text(config(name, count, intra))
        (tmp_path / name / "1" / "model.pt").write_bytes(buf.getvalue())
    return tmp_path


def logged_threads(log):
    """instance name -> the intra-op thread count ptserve logged for it."""
    found = {}
    for m in re.finditer(r"Intra-op threads for model instance '([^']+)': (\d+)", log):
        assert m.group(1) not in found, "logged twice for %s" % m.group(1)
        found[m.group(1)] = int(m.group(2))
    return found


def test_default_shares_the_cores_and_the_parameter_wins(start_server, repo):
    s = start_server(repo)
    rows = [[1.0, -2.0, 3.0, 0.25]]
    want = Scale()(torch.tensor(rows)).flatten().tolist()
    for name in MODELS:
        r = requests.post(s.url + "/v2/models/%s/infer" % name, timeout=TIMEOUT, json={
            "inputs": [{"name": "INPUT__0", "datatype": "FP32", "shape": [1, 4],
                        "data": [v for row in rows for v in row]}]})
        assert r.status_code == 200, r.text
        assert r.json()["outputs"][0]["data"] == pytest.approx(want)
    got = logged_threads(s.log())
    expect = {}
    for name, (count, intra) in MODELS.items():
        for k in range(count):  # instance k of the unnamed group 0: <model>_0_<k>
            expect["%s_0_%d" % (name, k)] = intra if intra is not None else expected_default(count)
    assert got == expect, s.log()
    assert_clean_exit(s)
