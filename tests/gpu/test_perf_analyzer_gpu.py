"""NVIDIA's perf_analyzer (2.51.0, as scripts/setup.sh takes it; on a GPU
host from the bundle, tests/gpu/run.sh) against a model on cuda:0, over
HTTP and gRPC:
- with real inputs and the outputs torch computes for them
  (--input-data with validation_data): perf_analyzer compares every answer;
  the same file with one expected value changed must make it fail, which
  shows the comparison is made;
- with its inputs and outputs in system shared memory and in CUDA shared
  memory (--shared-memory system|cuda), the path a GPU client takes to skip
  copies. perf_analyzer can not check outputs that are in shared memory
  (it finds no data in the response, "Output size doesn't match expected
  size", against any server), so there the checks are the server's: every
  request successful, the counts perf_analyzer read back, and not one byte
  copied by the host (ptserve_host_copy_bytes_total), which a request whose
  tensors travelled in the body would have cost.
perf_analyzer's times are printed, never asserted."""
import os
import subprocess
import sys

import numpy as np
import pytest
import requests
import torch

from conftest import (host_copy_bytes, perf_analyzer_counted, perf_analyzer_data,
                      perf_analyzer_path)

HERE = os.path.dirname(os.path.abspath(__file__))
TIMEOUT = 60
MODEL = "add_sub_fp32"  # a + b, a - b on [16] FP32, KIND_GPU (gen_gpu_models.py)
WINDOW = 200  # requests per measurement window
ROWS = 4  # distinct input rows perf_analyzer cycles through
PROTOCOLS = {"http": lambda s: ["-i", "http", "-u", s.url[len("http://"):]],
             "grpc": lambda s: ["-i", "grpc", "-u", s.grpc_target]}
assert torch.cuda.is_available(), "the GPU suite needs a CUDA device"


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    out = tmp_path_factory.mktemp("gpu_pa_models")
    subprocess.run([sys.executable, os.path.join(HERE, "gen_gpu_models.py"), str(out)], check=True)
    d = out / "repo"
    d.mkdir()
    os.symlink(str(out / MODEL), str(d / MODEL))
    return str(d)


@pytest.fixture(scope="module")
def data(repo, tmp_path_factory):
    """--input-data files (conftest.perf_analyzer_data), the expected
    outputs from torch running the model file on the same GPU."""
    model = torch.jit.load(os.path.join(repo, MODEL, "1", "model.pt"), map_location="cuda:0")
    rs = np.random.RandomState(5)
    rows = [{"INPUT0": rs.randn(16).astype(np.float32),
             "INPUT1": rs.randn(16).astype(np.float32)} for _ in range(ROWS)]

    def compute(row):
        with torch.inference_mode():
            s, d = model(*(torch.from_numpy(row[k]).cuda()[None] for k in ("INPUT0", "INPUT1")))
        return {"OUTPUT0": s[0].cpu().numpy(), "OUTPUT1": d[0].cpu().numpy()}
    return perf_analyzer_data(rows, compute, tmp_path_factory.mktemp("gpu_pa_data"))


@pytest.fixture
def server(repo, start_server):
    return start_server(repo, "--allow-client-shm=true")


def perf_analyzer(server, protocol, concurrency, *args):
    cmd = [perf_analyzer_path(), "-m", MODEL, "--concurrency-range", str(concurrency),
           "--measurement-mode", "count_windows", "--measurement-request-count", str(WINDOW),
           "--stability-percentage", "1000"] + PROTOCOLS[protocol](server) + list(args)
    run = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         timeout=180)
    print(" ".join(cmd) + "\n" + run.stdout)
    return run


def stats(server):
    r = requests.get(server.url + "/v2/models/%s/stats" % MODEL, timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    return r.json()["model_stats"][0]["inference_stats"]


@pytest.mark.parametrize("protocol", list(PROTOCOLS))
def test_answers_checked_by_perf_analyzer(server, data, protocol):
    for concurrency in (1, 4):
        perf_analyzer_counted(perf_analyzer(server, protocol, concurrency, "--input-data",
                                            data["checked"]), concurrency, WINDOW)
    run = perf_analyzer(server, protocol, 1, "--input-data", data["wrong"])
    assert run.returncode != 0, run.stdout
    assert "Output doesn't match expected output" in run.stdout, run.stdout


@pytest.mark.parametrize("memory", ["system", "cuda"])
@pytest.mark.parametrize("protocol", list(PROTOCOLS))
def test_shared_memory_inputs_and_outputs(server, data, protocol, memory):
    before, copied = stats(server), host_copy_bytes(server)
    sent = 0
    for concurrency in (1, 4):
        sent += perf_analyzer_counted(perf_analyzer(
            server, protocol, concurrency, "--input-data", data["plain"], "--shared-memory",
            memory, "--output-shared-memory-size", str(16 * 4)), concurrency, WINDOW)
    after = stats(server)
    assert after["success"]["count"] - before["success"]["count"] >= sent
    assert after["fail"]["count"] == before["fail"]["count"]
    # In the body, each request's 128 input bytes would have been staged by
    # the host: none was, and no output went through host memory either.
    assert host_copy_bytes(server) - copied == 0
    # perf_analyzer unregisters its regions when it ends.
    kind = "cudasharedmemory" if memory == "cuda" else "systemsharedmemory"
    r = requests.get(server.url + "/v2/%s/status" % kind, timeout=TIMEOUT)
    assert r.status_code == 200 and r.json() == [], r.text
