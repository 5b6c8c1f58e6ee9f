"""What the host sees of the GPU (issue 12): the nv_gpu_* metrics read
through NVML, checked against nvidia-smi (an independent reader of the same
driver) and torch; and that an instance waiting for its GPU sleeps rather
than spinning a core (CUDA events with blocking sync), measured from the
server's own CPU time in /proc. Run by tests/gpu/run.sh on a GPU host."""
import os
import re
import subprocess
import time

import numpy as np
import requests
import torch

TIMEOUT = 60
assert torch.cuda.is_available(), "the GPU suite needs a CUDA device"


def smi(fields):
    """nvidia-smi's values per GPU: [[field, ...], ...] as strings."""
    out = subprocess.run(["nvidia-smi", "--query-gpu=" + ",".join(fields),
                          "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, check=True).stdout
    return [[v.strip() for v in line.split(",")] for line in out.strip().splitlines()]


def gauges(server):
    """{family: {gpu_uuid: value}} for the nv_gpu_* and nv_energy_* samples."""
    text = requests.get(server.metrics_url, timeout=TIMEOUT).text
    out = {}
    for m in re.finditer(r'^(nv_gpu_\w+|nv_energy_consumption)\{gpu_uuid="([^"]+)"\} (\S+)$',
                         text, re.M):
        out.setdefault(m.group(1), {})[m.group(2)] = float(m.group(3))
    return out


class Busy(torch.nn.Module):
    """About 40 ms of FP32 matrix products on an H100 per call, on a small
    input and output (so the HTTP side costs next to nothing)."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(4096, 4096) / 64.0)

    def forward(self, x):
        h = x.expand(4096, 4096)
        for _ in range(16):
            h = torch.tanh(h @ self.w)
        return h.mean(0, keepdim=True)


def busy_repo(tmp_path):
    d = tmp_path / "busy" / "1"
    d.mkdir(parents=True)
    torch.jit.script(Busy().eval()).save(str(d / "model.pt"))
    (tmp_path / "busy" / "config.pbtxt").write_text(
        'name: "busy"\nbackend: "pytorch"\nmax_batch_size: 0\n'
        'input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 1, 4096 ] } ]\n'
        'output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 1, 4096 ] } ]\n'
        'instance_group [ { count: 1, kind: KIND_GPU } ]\n')
    return str(tmp_path)


def infer_busy(server, x):
    body = {"inputs": [{"name": "INPUT__0", "datatype": "FP32", "shape": [1, 4096],
                        "data": x.ravel().tolist()}]}
    r = requests.post(server.url + "/v2/models/busy/infer", json=body, timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    return r


def test_gpu_metrics_match_nvidia_smi(start_server, tmp_path):
    """One sample per GPU, labelled with its UUID; total memory as
    nvidia-smi reports it (MiB), used memory within the total and above the
    ~1 GiB the server's CUDA model holds, utilization a share in [0, 1],
    power above zero and within its enforced limit (nvidia-smi's)."""
    s = start_server(busy_repo(tmp_path), "--metrics-interval-ms", "100")
    infer_busy(s, np.ones((1, 4096), np.float32))
    g = gauges(s)
    want = {row[0]: row for row in smi(["uuid", "memory.total", "enforced.power.limit"])}
    assert set(g.get("nv_gpu_memory_total_bytes", {})) == set(want), (g, want)
    for uuid, (_, total_mib, limit_w) in want.items():
        total = g["nv_gpu_memory_total_bytes"][uuid]
        assert abs(total / 2**20 - float(total_mib)) <= 1, (total, total_mib)
        used = g["nv_gpu_memory_used_bytes"][uuid]
        assert 0 < used <= total
        assert 0.0 <= g["nv_gpu_utilization"][uuid] <= 1.0
        power = g["nv_gpu_power_usage"][uuid]
        assert 0 < power <= float(limit_w) * 1.1, (power, limit_w)
        assert abs(g["nv_gpu_power_limit"][uuid] - float(limit_w)) <= 1.0
        assert g["nv_energy_consumption"][uuid] >= 0
    # the model's device holds its weights (64 MiB) and LibTorch's context
    dev0 = smi(["uuid"])[torch.cuda.current_device()][0]
    assert g["nv_gpu_memory_used_bytes"][dev0] >= 64 * 2**20
    for i, uuid in enumerate(want):
        assert re.search(r"Collecting metrics for GPU %d: " % i, s.log()), s.log()
    assert "GPU metrics: none collected" not in s.log()
    # utilization follows the work: sampled every 100 ms while the GPU computes
    deadline = time.time() + 30
    seen = 0.0
    while seen == 0.0 and time.time() < deadline:
        infer_busy(s, np.ones((1, 4096), np.float32))
        seen = max(gauges(s)["nv_gpu_utilization"][dev0], seen)
    assert seen > 0.0
    s.stop()

    s = start_server(busy_repo(tmp_path / "off"), "--allow-gpu-metrics=false")
    assert gauges(s) == {}
    s.stop()


def thread_cpu(pid):
    """{thread name: CPU seconds} of a process's threads (/proc/<pid>/task),
    threads of one name added up."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
                head, rest = f.read().rsplit(")", 1)
        except OSError:
            continue  # the thread ended
        name = head.split("(", 1)[1]
        fields = rest.split()
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return out


def measure(server, x, n):
    """(wall s, server CPU s, {thread: CPU s}) over n requests one after the other."""
    before, t0 = thread_cpu(server.proc.pid), time.monotonic()
    for _ in range(n):
        infer_busy(server, x)
    wall = time.monotonic() - t0
    after = thread_cpu(server.proc.pid)
    per = {k: v - before.get(k, 0.0) for k, v in after.items()}
    return wall, sum(per.values()), per


def record(line):
    """Prints a measurement and appends it to $PTS_GPU_MEASUREMENTS (run.sh
    puts that file at the end of its log)."""
    print(line)
    path = os.environ.get("PTS_GPU_MEASUREMENTS")
    if path:
        with open(path, "a") as f:
            f.write(line + "\n")


def test_waiting_for_the_gpu_does_not_spin(start_server, tmp_path):
    """Requests one after the other to a model that keeps the GPU busy
    about 40-60 ms each, the same server binary waiting each way in the
    same run (PTSERVE_CUDA_WAIT): with the default timed wait (sleep
    through the expected time, then poll), with its spinning end
    (PTSERVE_CUDA_SPIN_TAIL=1: at most an eighth of the batch and 100 µs)
    and with the blocking-sync wait, the server's CPU time is a small share
    of the wall time and well under that of the polling wait (spin).
    Records CPU per request and the threads that used it."""
    repo = busy_repo(tmp_path)
    x = np.random.RandomState(3).randn(1, 4096).astype(np.float32)
    with torch.inference_mode():
        m = torch.jit.load(os.path.join(repo, "busy", "1", "model.pt"), map_location="cuda:0")
        want = m(torch.from_numpy(x).cuda()).cpu().numpy()
    n = 20
    got = {}
    for mode, env in (("spin", {"PTSERVE_CUDA_WAIT": "spin"}),
                      ("blocking", {"PTSERVE_CUDA_WAIT": "block"}), ("timed (default)", None),
                      ("timed, spin tail", {"PTSERVE_CUDA_SPIN_TAIL": "1"})):
        s = start_server(repo, env=env)
        r = infer_busy(s, x)  # the first runs settle the profiling executor
        out = np.array(r.json()["outputs"][0]["data"], np.float32).reshape(1, 4096)
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)
        for _ in range(2):
            infer_busy(s, x)
        wall, cpu, per = measure(s, x, n)
        top = sorted(per.items(), key=lambda kv: -kv[1])[:4]
        record("busy model, %s wait: %.1f ms wall, %.2f ms server CPU per request (%.0f %%); "
               "threads: %s" % (mode, wall / n * 1e3, cpu / n * 1e3, 100 * cpu / wall,
                                ", ".join("%s %.1f ms" % (k, v / n * 1e3) for k, v in top)))
        got[mode] = (wall, cpu)
        s.stop()
    for mode in ("blocking", "timed (default)", "timed, spin tail"):
        wall, cpu = got[mode]
        assert wall / n > 0.005, "the model was meant to keep the GPU busy for a while"
        assert cpu < 0.5 * wall, (mode, got)
        assert cpu < 0.5 * got["spin"][1], (mode, got)
