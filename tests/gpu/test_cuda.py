"""GPU end-to-end tests: ptserve on cuda:0, results checked against torch on
the same GPU. Run on a host with an NVIDIA GPU by tests/gpu/run.sh (CI has
no GPU; the CPU suite covers the device policy with faked capabilities)."""
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
import requests
import torch

from conftest import assert_graphs_replayed, check_conv_probe_answer

HERE = os.path.dirname(os.path.abspath(__file__))
assert torch.cuda.is_available(), "the GPU suite needs a CUDA device"

NP = {"FP32": np.float32, "FP16": np.float16, "INT64": np.int64}


@pytest.fixture(scope="session")
def repo(tmp_path_factory):
    out = tmp_path_factory.mktemp("gpu_models")
    subprocess.run([sys.executable, os.path.join(HERE, "gen_gpu_models.py"), str(out)], check=True)
    return str(out)


def subset(repo, tmp_path, names):
    d = tmp_path / "repo"
    d.mkdir(exist_ok=True)
    for n in names:
        shutil.copytree(os.path.join(repo, n), d / n)
    return str(d)


def to_wire(t):
    """torch tensor -> (datatype, bytes) in KServe binary layout."""
    if t.dtype == torch.bfloat16:
        return "BF16", t.view(torch.int16).cpu().numpy().tobytes()
    a = t.cpu().numpy()
    return {np.float32: "FP32", np.float16: "FP16", np.int64: "INT64"}[a.dtype.type], a.tobytes()


def from_wire(dtype, shape, raw):
    if dtype == "BF16":
        a = np.frombuffer(raw, dtype=np.int16).reshape(shape).copy()
        return torch.from_numpy(a).view(torch.bfloat16)
    return torch.from_numpy(np.frombuffer(raw, dtype=NP[dtype]).reshape(shape).copy())


def infer(url, model, inputs, outputs):
    """Binary request: inputs is [(name, tensor)]; returns {name: tensor}."""
    import json
    tensors, chunks = [], []
    for name, t in inputs:
        dt, raw = to_wire(t)
        tensors.append({"name": name, "datatype": dt, "shape": list(t.shape),
                        "parameters": {"binary_data_size": len(raw)}})
        chunks.append(raw)
    header = json.dumps({"inputs": tensors, "outputs": [
        {"name": o, "parameters": {"binary_data": True}} for o in outputs]}).encode()
    r = requests.post("%s/v2/models/%s/infer" % (url, model), data=header + b"".join(chunks),
                      headers={"Inference-Header-Content-Length": str(len(header))}, timeout=60)
    assert r.status_code == 200, r.text
    n = int(r.headers["Inference-Header-Content-Length"])
    meta = json.loads(r.content[:n])
    body, off, out = r.content[n:], 0, {}
    for o in meta["outputs"]:
        size = o["parameters"]["binary_data_size"]
        out[o["name"]] = from_wire(o["datatype"], o["shape"], body[off:off + size])
        off += size
    return out


def load(repo, name):
    return torch.jit.load(os.path.join(repo, name, "1", "model.pt"), map_location="cuda:0").eval()


def test_startup_logs_cuda_and_device(start_server, repo, tmp_path):
    s = start_server(subset(repo, tmp_path, ["mlp", "mlp_cpu", "mlp_auto"]))
    log = s.log()
    assert "CUDA built in" in log and "MPS not available" in log, log
    assert "Loaded PyTorch model from: " in log and "on device: cuda:0" in log, log
    assert "PyTorch instance initialized on device: cuda:0" in log, log
    assert "PyTorch instance initialized on device: cpu" in log, log  # mlp_cpu stays on the CPU


@pytest.mark.parametrize("suffix,dtype", [("fp32", torch.float32), ("fp16", torch.float16),
                                          ("bf16", torch.bfloat16)])
def test_add_sub_matches_torch_on_gpu(start_server, repo, tmp_path, suffix, dtype):
    name = "add_sub_" + suffix
    s = start_server(subset(repo, tmp_path, [name]))
    model = load(repo, name)
    g = torch.Generator().manual_seed(7)
    for batch in range(1, 9):
        a = torch.randn(batch, 16, generator=g).to(dtype)
        b = torch.randn(batch, 16, generator=g).to(dtype)
        got = infer(s.url, name, [("INPUT0", a), ("INPUT1", b)], ["OUTPUT0", "OUTPUT1"])
        with torch.inference_mode():
            want0, want1 = model(a.cuda(), b.cuda())
        assert got["OUTPUT0"].dtype == dtype
        assert torch.equal(got["OUTPUT0"], want0.cpu()), (batch, got["OUTPUT0"], want0)
        assert torch.equal(got["OUTPUT1"], want1.cpu())


@pytest.mark.parametrize("name", ["mlp", "mlp_traced", "mlp_auto", "mlp_cuda_accel",
                                  "mlp_mps_accel", "mlp_warmup"])
def test_mlp_variants_match_torch(start_server, repo, tmp_path, name):
    s = start_server(subset(repo, tmp_path, [name]))
    model = load(repo, name)
    x = torch.randn(5, 64, generator=torch.Generator().manual_seed(3))
    got = infer(s.url, name, [("INPUT__0", x)], ["OUTPUT__0"])["OUTPUT__0"]
    with torch.inference_mode():
        want = model(x.cuda()).cpu()
    assert torch.allclose(got, want, atol=1e-6), (got - want).abs().max()
    assert "PyTorch instance initialized on device: cuda:0" in s.log()
    if name == "mlp_mps_accel":
        assert "'mps' is not usable" in s.log(), s.log()
    if name == "mlp_warmup":
        assert "warmup 'w' ran 2 time(s) at batch size 4" in s.log(), s.log()


def test_cuda_graph_replay_equals_eager(start_server, repo, tmp_path):
    s = start_server(subset(repo, tmp_path, ["mlp", "mlp_graphs"]))
    log = s.log()
    assert "captured a CUDA graph for batch size 1" in log, log
    assert "captured a CUDA graph for batch size 4" in log, log
    g = torch.Generator().manual_seed(11)
    for batch in (1, 4, 3):  # 3 has no graph: eager
        for _ in range(3):
            x = torch.randn(batch, 64, generator=g)
            eager = infer(s.url, "mlp", [("INPUT__0", x)], ["OUTPUT__0"])["OUTPUT__0"]
            graph = infer(s.url, "mlp_graphs", [("INPUT__0", x)], ["OUTPUT__0"])["OUTPUT__0"]
            assert torch.equal(graph, eager), (batch, (graph - eager).abs().max())
    assert "replaying the CUDA graph for batch size 1" in s.log(), s.log()
    assert "replaying the CUDA graph for batch size 4" in s.log(), s.log()


def test_cuda_graph_padding_answers_as_eager(start_server, repo, tmp_path):
    """CUDA_GRAPH_PAD_BATCHES: a batch of 1 runs in the graph of 2, batches
    of 3 to 7 in the graph of 8, padded with zero rows; each answer is the
    eager model's (torch on the same GPU) for exactly the rows sent. Triton's
    graph_lower_bound: batches of 5 to 7 pad into the graph of 8, and a
    batch of 3, below the bound, runs eagerly. Both models (three instances)
    load and capture at once."""
    s = start_server(subset(repo, tmp_path, ["mlp_graphs_pad", "mlp_graphs_bound"]))
    log = s.log()
    for size in (2, 8):
        for instance in ("mlp_graphs_pad_0_0", "mlp_graphs_pad_0_1"):
            assert ("'mlp_graphs_pad', instance '%s': captured a CUDA graph for batch size %d "
                    "on cuda:0 (smaller batches padded up to it)" % (instance, size)) in log, log
    model = load(repo, "mlp_graphs_pad")
    g = torch.Generator().manual_seed(12)
    for batch in (1, 3, 7, 5):
        x = torch.randn(batch, 64, generator=g)
        with torch.no_grad():
            want = model(x.cuda()).cpu()
        got = infer(s.url, "mlp_graphs_pad", [("INPUT__0", x)], ["OUTPUT__0"])["OUTPUT__0"]
        assert got.shape == (batch, 8), got.shape
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    log = s.log()
    for size in (2, 8):
        assert re.search(r"'mlp_graphs_pad', instance 'mlp_graphs_pad_0_[01]': replaying the "
                         r"CUDA graph for batch size %d\b" % size, log), log

    bound = "'mlp_graphs_bound', instance 'mlp_graphs_bound_0_0': replaying the CUDA graph for batch size 8"
    x = torch.randn(3, 64, generator=g)
    with torch.no_grad():
        want = model(x.cuda()).cpu()
    got = infer(s.url, "mlp_graphs_bound", [("INPUT__0", x)], ["OUTPUT__0"])["OUTPUT__0"]
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    assert bound not in s.log(), "a batch of 3 is below graph_lower_bound 5: " + s.log()
    x = torch.randn(6, 64, generator=g)
    with torch.no_grad():
        want = model(x.cuda()).cpu()
    got = infer(s.url, "mlp_graphs_bound", [("INPUT__0", x)], ["OUTPUT__0"])["OUTPUT__0"]
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    assert bound in s.log(), s.log()


def test_channels_last_graph_inputs_are_copied_in_and_laid_out_by_the_graph(
        start_server, repo, tmp_path):
    """INPUT_MEMORY_FORMAT channels_last with CUDA graphs: a batch of 1 or 4
    is copied as it lies into the graph's static input and the graph's
    first step reorders it to NHWC; batches of 2 and 3 are padded into the
    graph of 4; a batch of 6 has no graph and runs eagerly, laid out before
    forward(). Every answer is torch's on the same GPU for a channels-last
    input, and the model's own probe says forward() saw NHWC each time."""
    name = "conv_probe_cl_graphs"
    s = start_server(subset(repo, tmp_path, [name]))
    model = load(repo, name)
    g = torch.Generator().manual_seed(21)
    for batch in (1, 4, 3, 2, 6, 1):
        x = torch.randn(batch, 3, 16, 16, generator=g)
        got = infer(s.url, name, [("INPUT__0", x)], ["OUTPUT__0", "OUTPUT__1"])
        check_conv_probe_answer(model, x, got["OUTPUT__0"], got["OUTPUT__1"])
    assert_graphs_replayed(s.log(), name, (1, 4))


def test_cudnn_switch_does_not_leak_between_models(start_server, repo, tmp_path):
    s = start_server(subset(repo, tmp_path, ["conv", "conv_nocudnn"]))
    model = load(repo, "conv")
    import concurrent.futures as cf
    x = torch.randn(4, 3, 32, 32, generator=torch.Generator().manual_seed(5))
    with torch.inference_mode():
        want = model(x.cuda()).cpu()

    def call(name):
        return infer(s.url, name, [("INPUT__0", x)], ["OUTPUT__0"])["OUTPUT__0"]

    with cf.ThreadPoolExecutor(8) as pool:
        results = list(pool.map(call, ["conv", "conv_nocudnn"] * 16))
    for got in results:
        assert torch.allclose(got, want, atol=1e-4), (got - want).abs().max()


def test_memory_fraction_is_enforced_and_server_lives(start_server, repo, tmp_path):
    s = start_server(subset(repo, tmp_path, ["alloc_limited"]))
    assert "memory fraction of cuda:0 set to 0.05" in s.log(), s.log()
    total = torch.cuda.get_device_properties(0).total_memory
    small = torch.tensor([1], dtype=torch.int64)  # 4 MiB
    got = infer(s.url, "alloc_limited", [("INPUT__0", small)], ["OUTPUT__0"])["OUTPUT__0"]
    assert got.item() == 1048576.0
    # A fifth of the device: over the 5 % limit, though the device has room.
    mib = int(total * 0.2 / 4 / 1048576)
    big = torch.tensor([mib], dtype=torch.int64)
    import json
    dt, raw = to_wire(big)
    header = json.dumps({"inputs": [{"name": "INPUT__0", "datatype": dt, "shape": [1],
                                     "parameters": {"binary_data_size": len(raw)}}]}).encode()
    r = requests.post(s.url + "/v2/models/alloc_limited/infer", data=header + raw,
                      headers={"Inference-Header-Content-Length": str(len(header))}, timeout=60)
    assert r.status_code == 500, r.text
    assert "out of memory" in r.json()["error"].lower(), r.text
    # The server and the model live on.
    assert requests.get(s.url + "/v2/health/ready", timeout=5).status_code == 200
    got = infer(s.url, "alloc_limited", [("INPUT__0", small)], ["OUTPUT__0"])["OUTPUT__0"]
    assert got.item() == 1048576.0


def test_staging_for_the_largest_batch_is_pinned_at_load(start_server, repo, tmp_path):
    """A CUDA instance pins its staging for max_batch_size rows of every
    input at load (pytorch.c reserve_staging), so that no batch pins memory
    in its input phase: conv_big takes 8 rows of 3x128x128 FP32 (1.5 MiB;
    staging comes in powers of two from 64 KiB: 2 MiB), and a full batch of
    8 is gathered there with no growth, answered as torch answers it. The
    same module with variable dims (conv_var) reserves nothing, and its
    first staged request (48 KiB: ordinary memory, staged even alone) pins
    64 KiB in its own input phase, as all staging did before. With 8 rows
    of 3x4096x1024 FP32 (384 MiB, above the 256 MiB an instance reserves
    at most: conv_huge) it reserves nothing either."""
    import concurrent.futures
    d = subset(repo, tmp_path, ["conv_big"])
    for name, dims in (("conv_var", ("[ 3, -1, -1 ]", "[ 8, -1, -1 ]")),
                       ("conv_huge", ("[ 3, 4096, 1024 ]", "[ 8, 4096, 1024 ]"))):
        shutil.copytree(os.path.join(d, "conv_big"), os.path.join(d, name))
        cfg = os.path.join(d, name, "config.pbtxt")
        with open(cfg) as f:
            text = f.read().replace('"conv_big"', '"%s"' % name)
        text = text.replace("dims: [ 3, 128, 128 ]", "dims: " + dims[0], 1)
        with open(cfg, "w") as f:
            f.write(text.replace("dims: [ 8, 128, 128 ]", "dims: " + dims[1], 1))
    s = start_server(d)

    def reserved(model):
        m = re.search(r"Reserved ([0-9.]+) MiB of pinned staging for model instance "
                      r"'%s_[^']*' \(max_batch_size 8\)" % model, s.log())
        return m and float(m.group(1))

    def grew(model):
        return re.findall(r"Pinned staging of model instance '%s_[^']*' grew to ([0-9.]+) MiB"
                          % model, s.log())

    rows = 8 * 3 * 128 * 128 * 4
    pow2 = 65536
    while pow2 < rows:
        pow2 *= 2
    assert reserved("conv_big") == round(pow2 / 2**20, 1), s.log()
    assert reserved("conv_var") is None and reserved("conv_huge") is None, s.log()
    assert re.search(r"Pinned staging of model instance 'conv_huge_[^']*' grows as batches "
                     r"need it", s.log()), s.log()

    ref = load(repo, "conv_big")
    torch.manual_seed(6)
    xs = [torch.randn(1, 3, 128, 128) for _ in range(8)]
    with torch.no_grad():
        want = [ref(x.cuda()).cpu() for x in xs]
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        outs = list(pool.map(lambda x: infer(s.url, "conv_big", [("INPUT__0", x)],
                                             ["OUTPUT__0"])["OUTPUT__0"], xs))
    for g, w in zip(outs, want):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4)
    stats = requests.get(s.url + "/v2/models/conv_big/stats", timeout=5).json()
    assert max(b["batch_size"] for b in stats["model_stats"][0]["batch_stats"]) > 1, stats
    assert grew("conv_big") == [], s.log()

    small = torch.randn(1, 3, 64, 64)
    got = infer(s.url, "conv_var", [("INPUT__0", small)], ["OUTPUT__0"])["OUTPUT__0"]
    with torch.no_grad():
        torch.testing.assert_close(got, ref(small.cuda()).cpu(), rtol=1e-4, atol=1e-4)
    assert grew("conv_var") == ["0.1"], s.log()


def test_pinned_pool_reserves_request_bodies_at_load(start_server, repo, tmp_path):
    """--pinned-memory-pool-byte-size: a CUDA instance reserves the pool at
    load as blocks of its model's one-request body (core/pinned.h): for
    conv_big one 3x128x128 FP32 image plus 1 KiB of header, 197,632 bytes,
    in LibTorch's power-of-two block of 256 KiB, so 4 blocks in a pool of
    1 MiB. The pool is shared: of conv_big and its copy, one reserves all
    4 and the other none. The MLP's bodies (256 bytes) are too small to be
    pinned and reserve nothing. Requests are answered as torch answers
    them, their bodies in pinned memory (no host copy)."""
    from conftest import host_copy_bytes
    d = subset(repo, tmp_path, ["conv_big", "mlp"])
    shutil.copytree(os.path.join(d, "conv_big"), os.path.join(d, "conv_big_copy"))
    cfg = os.path.join(d, "conv_big_copy", "config.pbtxt")
    with open(cfg) as f:
        text = f.read()
    with open(cfg, "w") as f:
        f.write(text.replace('"conv_big"', '"conv_big_copy"'))
    s = start_server(d, "--pinned-memory-pool-byte-size=1048576")
    log = s.log()
    assert "Pinned memory pool: 1048576 bytes of request bodies" in log, log
    body = 3 * 128 * 128 * 4 + 1024
    block = 1
    while block < body:
        block *= 2
    lines = re.findall(r"Reserved (\d+) pinned request bodies of (\d+) bytes \(blocks of (\d+)\) "
                       r"for model instance '([^']*)'", log)
    assert [(n, b, k) for n, b, k, _ in lines] == [(str(1048576 // block), str(body),
                                                    str(block))], log
    assert lines[0][3].startswith("conv_big"), log

    ref = load(repo, "conv_big")
    torch.manual_seed(7)
    x = torch.randn(1, 3, 128, 128)
    with torch.no_grad():
        want = ref(x.cuda()).cpu()
    for model in ("conv_big", "conv_big_copy"):
        before = host_copy_bytes(s)
        got = infer(s.url, model, [("INPUT__0", x)], ["OUTPUT__0"])["OUTPUT__0"]
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
        assert host_copy_bytes(s) - before == 0


def test_large_bodies_reach_the_gpu_from_pinned_memory(start_server, repo, tmp_path):
    """Request bodies of 64 KiB and more are read into pinned memory once a
    model runs on CUDA (core/pinned.h), so a batch of one goes to the device
    by DMA from the body: the host copies none of its bytes
    (ptserve_host_copy_bytes_total: before this, the 192 KiB image was
    gathered into the instance's staging buffer). Over HTTP and gRPC; a
    small body (the MLP's 256 bytes) is still staged, byte for byte; and
    concurrent requests batched together are still gathered and answered
    as torch answers each."""
    import concurrent.futures
    import tritonclient.grpc as grpcclient
    from conftest import host_copy_bytes
    s = start_server(subset(repo, tmp_path, ["conv_big", "mlp"]))
    assert "Request bodies of 64 KiB and more are read into pinned host memory" in s.log(), s.log()
    ref = load(repo, "conv_big")
    torch.manual_seed(5)
    xs = [torch.randn(1, 3, 128, 128) for _ in range(9)]
    with torch.no_grad():
        want = [ref(x.cuda()).cpu() for x in xs]

    before = host_copy_bytes(s)
    got = infer(s.url, "conv_big", [("INPUT__0", xs[0])], ["OUTPUT__0"])["OUTPUT__0"]
    torch.testing.assert_close(got, want[0], rtol=1e-4, atol=1e-4)
    assert host_copy_bytes(s) - before == 0

    c = grpcclient.InferenceServerClient(s.grpc_target)
    inp = grpcclient.InferInput("INPUT__0", [1, 3, 128, 128], "FP32")
    inp.set_data_from_numpy(xs[1].numpy())
    before = host_copy_bytes(s)
    r = c.infer("conv_big", [inp], outputs=[grpcclient.InferRequestedOutput("OUTPUT__0")])
    torch.testing.assert_close(torch.from_numpy(r.as_numpy("OUTPUT__0")), want[1],
                               rtol=1e-4, atol=1e-4)
    assert host_copy_bytes(s) - before == 0

    small = torch.randn(1, 64)
    before = host_copy_bytes(s)
    infer(s.url, "mlp", [("INPUT__0", small)], ["OUTPUT__0"])
    assert host_copy_bytes(s) - before == small.numel() * 4

    # Seven at once inside the 20 ms queue delay: batched, gathered from
    # their pinned bodies into staging (their bytes copied once).
    with concurrent.futures.ThreadPoolExecutor(7) as pool:
        outs = list(pool.map(lambda x: infer(s.url, "conv_big", [("INPUT__0", x)],
                                             ["OUTPUT__0"])["OUTPUT__0"], xs[2:]))
    for g, w in zip(outs, want[2:]):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4)
    stats = requests.get(s.url + "/v2/models/conv_big/stats", timeout=5).json()
    counts = {b["batch_size"] for b in stats["model_stats"][0]["batch_stats"]}
    assert max(counts) > 1, stats
