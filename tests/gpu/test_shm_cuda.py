"""Shared memory and the GPU data path on a CUDA host (issue 12 parts 2, 3):
CUDA shared-memory regions made by tritonclient.utils.cuda_shared_memory
and registered the way tritonclient.http does (the raw handle from
get_raw_handle(), base64), inputs read from them on the GPU and outputs
written to them; system shared memory pinned for DMA; batches gathered
into pinned staging. Expected values come from torch running the same
model.pt on the same GPU. Run by tests/gpu/run.sh on a GPU host (needs
tritonclient's utils and cuda-python there)."""
import base64
import concurrent.futures as cf
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
import requests
import torch

from conftest import assert_graphs_replayed, check_conv_probe_answer, host_copy_bytes

try:  # not at collection: a host without it fails these tests, not the suite
    import tritonclient.utils.cuda_shared_memory as cudashm
    import tritonclient.utils.shared_memory as shm
    TRITONCLIENT_ERROR = None
except ImportError as e:
    cudashm = shm = None
    TRITONCLIENT_ERROR = e

HERE = os.path.dirname(os.path.abspath(__file__))
TIMEOUT = 60
PREFIX = "/ptsgpu_%d_" % os.getpid()
assert torch.cuda.is_available(), "the GPU suite needs a CUDA device"


@pytest.fixture(autouse=True)
def needs_tritonclient():
    if TRITONCLIENT_ERROR is not None:
        pytest.fail("tritonclient.utils.cuda_shared_memory does not import here (%s): install "
                    "tritonclient and cuda-python, or carry .bundle from scripts/bundle-deps.sh"
                    % TRITONCLIENT_ERROR)


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    out = tmp_path_factory.mktemp("gpu_shm_models")
    subprocess.run([sys.executable, os.path.join(HERE, "gen_gpu_models.py"), str(out)], check=True)
    return str(out)


def subset(repo, tmp_path, names, extra=None):
    d = tmp_path / "repo"
    d.mkdir(exist_ok=True)
    for n in names:
        shutil.copytree(os.path.join(repo, n), d / n)
        if extra:
            with open(d / n / "config.pbtxt", "a") as f:
                f.write(extra + "\n")
    return str(d)


def load(repo, name, device="cuda:0"):
    return torch.jit.load(os.path.join(repo, name, "1", "model.pt"), map_location=device).eval()


def post(server, path, body=None):
    return requests.post(server.url + path, data=json.dumps(body) if body is not None else "",
                         timeout=TIMEOUT)


def register_cuda(server, name, handle, byte_size, device_id=0):
    """What tritonclient.http's register_cuda_shared_memory sends."""
    return post(server, "/v2/cudasharedmemory/region/%s/register" % name,
                {"raw_handle": {"b64": cudashm.get_raw_handle(handle).decode()},
                 "device_id": device_id, "byte_size": byte_size})


def shm_input(name, dtype, shape, region, size, offset=0):
    return {"name": name, "datatype": dtype, "shape": list(shape),
            "parameters": {"shared_memory_region": region, "shared_memory_byte_size": size,
                           "shared_memory_offset": offset}}


def shm_output(name, region, size, offset=0):
    return {"name": name, "parameters": {"binary_data": False, "shared_memory_region": region,
                                         "shared_memory_byte_size": size,
                                         "shared_memory_offset": offset}}


def infer(server, model, inputs, outputs):
    r = post(server, "/v2/models/%s/infer" % model, {"inputs": inputs, "outputs": outputs})
    assert r.status_code == 200, r.text
    return r.json()


@pytest.fixture
def cuda_regions():
    made = []

    def make(name, size):
        h = cudashm.create_shared_memory_region(name, size, 0)
        made.append(h)
        return h

    yield make
    for h in made:
        cudashm.destroy_shared_memory_region(h)


def test_cuda_shm_register_status_unregister(start_server, repo, tmp_path, cuda_regions):
    s = start_server(subset(repo, tmp_path, ["add_sub_fp32"]), "--allow-client-shm=true")
    assert "cuda_shared_memory" in requests.get(s.url + "/v2", timeout=TIMEOUT).json()["extensions"]
    h = cuda_regions("g", 4096)
    r = register_cuda(s, "g", h, 4096)
    assert r.status_code == 200, r.text
    st = requests.get(s.url + "/v2/cudasharedmemory/status", timeout=TIMEOUT).json()
    assert st == [{"name": "g", "device_id": 0, "byte_size": 4096}]
    # the same name again, and through the other extension's status
    r = register_cuda(s, "g", h, 4096)
    assert r.status_code == 400 and "already in manager" in r.json()["error"]
    r = requests.get(s.url + "/v2/systemsharedmemory/region/g/status", timeout=TIMEOUT)
    assert r.status_code == 404 and "registered as CUDA shared memory" in r.json()["error"]
    assert post(s, "/v2/cudasharedmemory/region/g/unregister").status_code == 200
    assert requests.get(s.url + "/v2/cudasharedmemory/status", timeout=TIMEOUT).json() == []


@pytest.mark.parametrize("suffix,np_type,dtype", [("fp32", np.float32, "FP32"),
                                                   ("fp16", np.float16, "FP16")])
def test_cuda_shm_inputs_and_outputs(start_server, repo, tmp_path, cuda_regions, suffix, np_type,
                                     dtype):
    """add_sub on cuda:0: both inputs in one CUDA region (the second at an
    offset), both outputs in another; a batch of one, so the model reads the
    inputs where they are and writes the outputs there device to device."""
    name = "add_sub_" + suffix
    s = start_server(subset(repo, tmp_path, [name]), "--allow-client-shm=true")
    rs = np.random.RandomState(5)
    a = rs.uniform(-4, 4, (3, 16)).astype(np_type)
    b = rs.uniform(-4, 4, (3, 16)).astype(np_type)
    n = a.nbytes
    hin = cuda_regions("cin", 2 * n)
    hout = cuda_regions("cout", 2 * n)
    cudashm.set_shared_memory_region(hin, [a, b])
    assert register_cuda(s, "cin", hin, 2 * n).status_code == 200
    assert register_cuda(s, "cout", hout, 2 * n).status_code == 200
    resp = infer(s, name, [shm_input("INPUT0", dtype, a.shape, "cin", n),
                           shm_input("INPUT1", dtype, b.shape, "cin", n, n)],
                 [shm_output("OUTPUT0", "cout", n), shm_output("OUTPUT1", "cout", n, n)])
    assert all("data" not in o and "parameters" not in o for o in resp["outputs"]), resp
    model = load(repo, name)
    with torch.inference_mode():
        w0, w1 = model(torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda())
    got = cudashm.get_contents_as_numpy(hout, np_type, [2, 3, 16])
    np.testing.assert_array_equal(got[0], w0.cpu().numpy())
    np.testing.assert_array_equal(got[1], w1.cpu().numpy())


@pytest.mark.parametrize("kind", ["cuda", "system"])
def test_shm_input_is_copied_into_a_cuda_graph(start_server, repo, tmp_path, cuda_regions, kind):
    """A channels-last model with CUDA graphs of 1 and 4, its input in a
    CUDA region (on the device) or a system one (pinned by the server):
    the bytes the caller keeps until the batch ends, which the bridge
    copies straight into the graph's static input (stage_in_graph). A batch
    of 1 or 4 fills it, a batch of 3 its first rows (padded into 4), and a
    batch of 6 (no graph) runs eagerly from the region. Each answer is
    torch's on the same GPU for an NHWC input, the model's probe says
    forward() saw NHWC, and the client's region is left as it was."""
    name = "conv_probe_cl_graphs"
    s = start_server(subset(repo, tmp_path, [name]), "--allow-client-shm=true",
                     "--log-verbose", "1")
    model = load(repo, name)
    size = 6 * 3 * 16 * 16 * 4
    if kind == "cuda":
        h = cuda_regions("graphin", size)
        assert register_cuda(s, "graphin", h, size).status_code == 200
        put, get = cudashm.set_shared_memory_region, cudashm.get_contents_as_numpy
    else:
        h = shm.create_shared_memory_region("graphin", PREFIX + "graphin", size)
        r = post(s, "/v2/systemsharedmemory/region/graphin/register",
                 {"key": PREFIX + "graphin", "offset": 0, "byte_size": size})
        assert r.status_code == 200, r.text
        put, get = shm.set_shared_memory_region, shm.get_contents_as_numpy
    try:
        rs = np.random.RandomState(9)
        for batch in (1, 4, 3, 6, 1):
            x = rs.randn(batch, 3, 16, 16).astype(np.float32)
            put(h, [x])
            resp = infer(s, name, [shm_input("INPUT__0", "FP32", x.shape, "graphin", x.nbytes)],
                         [{"name": "OUTPUT__0"}, {"name": "OUTPUT__1"}])
            out = {o["name"]: np.array(o["data"], dtype=np.float32).reshape(o["shape"])
                   for o in resp["outputs"]}
            check_conv_probe_answer(model, x, out["OUTPUT__0"], out["OUTPUT__1"])
            np.testing.assert_array_equal(get(h, np.float32, [batch, 3, 16, 16]), x)
    finally:
        if kind == "system":
            post(s, "/v2/systemsharedmemory/unregister")
            shm.destroy_shared_memory_region(h)
    log = s.log()
    assert_graphs_replayed(log, name, (1, 4))
    if kind == "system":
        assert re.search(r"registered system shared memory region 'graphin'.*pinned for DMA", log)


def test_cuda_shm_input_to_a_cpu_instance(start_server, repo, tmp_path, cuda_regions):
    """A KIND_CPU instance gets a CUDA shared-memory input copied to the host."""
    s = start_server(subset(repo, tmp_path, ["mlp_cpu"]), "--allow-client-shm=true")
    x = np.random.RandomState(2).randn(4, 64).astype(np.float32)
    h = cuda_regions("cpuin", x.nbytes)
    cudashm.set_shared_memory_region(h, [x])
    assert register_cuda(s, "cpuin", h, x.nbytes).status_code == 200
    resp = infer(s, "mlp_cpu", [shm_input("INPUT__0", "FP32", x.shape, "cpuin", x.nbytes)],
                 [{"name": "OUTPUT__0"}])
    got = np.array(resp["outputs"][0]["data"], dtype=np.float32).reshape(4, 8)
    with torch.inference_mode():
        want = load(repo, "mlp_cpu", "cpu")(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_bad_cuda_registrations(start_server, repo, tmp_path, cuda_regions):
    s = start_server(subset(repo, tmp_path, ["add_sub_fp32"]), "--allow-client-shm=true")
    h = cuda_regions("bad", 1024)
    raw = cudashm.get_raw_handle(h).decode()

    def reg(name, b64, device, size):
        return post(s, "/v2/cudasharedmemory/region/%s/register" % name,
                    {"raw_handle": {"b64": b64}, "device_id": device, "byte_size": size})

    cases = [
        (reg("short", base64.b64encode(b"x" * 10).decode(), 0, 8), "10 bytes"),
        (reg("zeros", base64.b64encode(bytes(64)).decode(), 0, 8), "cudaIpcOpenMemHandle"),
        (reg("dev", raw, 99, 8), "does not exist"),
        (reg("big", raw, 0, 1 << 30), "larger than the"),
        (reg("none", raw, 0, 0), "greater than 0"),
    ]
    for r, words in cases:
        assert r.status_code == 400, r.text
        assert words in r.json()["error"], r.text
    assert requests.get(s.url + "/v2/cudasharedmemory/status", timeout=TIMEOUT).json() == []
    # still serving, and the same handle registers fine with a size that fits
    assert reg("ok", raw, 0, 1024).status_code == 200
    assert s.alive()


def test_system_shm_is_pinned_and_used_on_gpu(start_server, repo, tmp_path):
    """System shared memory on a CUDA build is pinned (the log says so), so
    the input goes to the GPU by DMA from the region and the output comes
    back into it; the values are torch's."""
    s = start_server(subset(repo, tmp_path, ["add_sub_fp32"]), "--allow-client-shm=true",
                     "--log-verbose", "1")
    a = np.random.RandomState(9).randn(2, 16).astype(np.float32)
    b = np.random.RandomState(10).randn(2, 16).astype(np.float32)
    n = a.nbytes
    hin = shm.create_shared_memory_region("sin", PREFIX + "sin", 2 * n)
    hout = shm.create_shared_memory_region("sout", PREFIX + "sout", 2 * n)
    try:
        shm.set_shared_memory_region(hin, [a, b])
        for region, h in (("sin", PREFIX + "sin"), ("sout", PREFIX + "sout")):
            r = post(s, "/v2/systemsharedmemory/region/%s/register" % region,
                     {"key": h, "offset": 0, "byte_size": 2 * n})
            assert r.status_code == 200, r.text
        infer(s, "add_sub_fp32", [shm_input("INPUT0", "FP32", a.shape, "sin", n),
                                  shm_input("INPUT1", "FP32", b.shape, "sin", n, n)],
              [shm_output("OUTPUT0", "sout", n), shm_output("OUTPUT1", "sout", n, n)])
        model = load(repo, "add_sub_fp32")
        with torch.inference_mode():
            w0, w1 = model(torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda())
        np.testing.assert_array_equal(shm.get_contents_as_numpy(hout, np.float32, [2, 16]),
                                      w0.cpu().numpy())
        np.testing.assert_array_equal(
            shm.get_contents_as_numpy(hout, np.float32, [2, 16], offset=n), w1.cpu().numpy())
        assert re.search(r"registered system shared memory region 'sin'.*pinned for DMA", s.log())
        post(s, "/v2/systemsharedmemory/unregister")
    finally:
        shm.destroy_shared_memory_region(hin)
        shm.destroy_shared_memory_region(hout)


def test_batches_gather_into_pinned_staging(start_server, repo, tmp_path):
    """Four requests held until all are queued run as one batch of 8 on the
    GPU (gathered into the instance's pinned staging); every request gets
    torch's answer for its own rows."""
    s = start_server(subset(repo, tmp_path, ["add_sub_fp32"], "dynamic_batching { }"),
                     env={"PTSERVE_DELAY_SCHEDULER": "4"})
    rs = np.random.RandomState(11)
    reqs = [(rs.randn(k, 16).astype(np.float32), rs.randn(k, 16).astype(np.float32))
            for k in (1, 2, 2, 3)]

    def one(ab):
        a, b = ab
        body = {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": list(a.shape),
                            "data": a.ravel().tolist()},
                           {"name": "INPUT1", "datatype": "FP32", "shape": list(b.shape),
                            "data": b.ravel().tolist()}]}
        return post(s, "/v2/models/add_sub_fp32/infer", body)

    with cf.ThreadPoolExecutor(4) as pool:
        resps = list(pool.map(one, reqs))
    model = load(repo, "add_sub_fp32")
    for (a, b), r in zip(reqs, resps):
        assert r.status_code == 200, r.text
        out = {o["name"]: np.array(o["data"], dtype=np.float32).reshape(o["shape"])
               for o in r.json()["outputs"]}
        with torch.inference_mode():
            w0, w1 = model(torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda())
        np.testing.assert_array_equal(out["OUTPUT0"], w0.cpu().numpy())
        np.testing.assert_array_equal(out["OUTPUT1"], w1.cpu().numpy())
    st = requests.get(s.url + "/v2/models/add_sub_fp32/stats", timeout=TIMEOUT).json()
    sizes = {b["batch_size"] for b in st["model_stats"][0]["batch_stats"]}
    assert sizes == {8}, st


def test_cuda_shm_input_costs_no_host_copy(start_server, repo, tmp_path, cuda_regions):
    """ptserve_host_copy_bytes_total, worked out by hand for add_sub on
    cuda:0 with a batch of one: inputs and outputs in CUDA shared memory
    cross no host memory (the model reads the client's buffer, writes the
    outputs there device to device): 0 bytes. Inputs in system shared
    memory (pinned, DMA from the region) and outputs written back into it
    by the device: 0 bytes. The same inputs in the request body are staged
    once into pinned memory: exactly their bytes (2n)."""
    s = start_server(subset(repo, tmp_path, ["add_sub_fp32"]), "--allow-client-shm=true")
    rs = np.random.RandomState(21)
    a = rs.randn(2, 16).astype(np.float32)
    b = rs.randn(2, 16).astype(np.float32)
    n = a.nbytes
    model = load(repo, "add_sub_fp32")
    with torch.inference_mode():
        w0, w1 = (t.cpu().numpy() for t in model(torch.from_numpy(a).cuda(),
                                                 torch.from_numpy(b).cuda()))
    hin = cuda_regions("zin", 2 * n)
    hout = cuda_regions("zout", 2 * n)
    cudashm.set_shared_memory_region(hin, [a, b])
    assert register_cuda(s, "zin", hin, 2 * n).status_code == 200
    assert register_cuda(s, "zout", hout, 2 * n).status_code == 200
    outs = [shm_output("OUTPUT0", "zout", n), shm_output("OUTPUT1", "zout", n, n)]

    before = host_copy_bytes(s)
    infer(s, "add_sub_fp32", [shm_input("INPUT0", "FP32", a.shape, "zin", n),
                              shm_input("INPUT1", "FP32", b.shape, "zin", n, n)], outs)
    assert host_copy_bytes(s) - before == 0
    got = cudashm.get_contents_as_numpy(hout, np.float32, [2, 2, 16])
    np.testing.assert_array_equal(got[0], w0)
    np.testing.assert_array_equal(got[1], w1)

    sin = shm.create_shared_memory_region("zsin", PREFIX + "zsin", 2 * n)
    sout = shm.create_shared_memory_region("zsout", PREFIX + "zsout", 2 * n)
    try:
        shm.set_shared_memory_region(sin, [a, b])
        for region in ("zsin", "zsout"):
            r = post(s, "/v2/systemsharedmemory/region/%s/register" % region,
                     {"key": PREFIX + region, "offset": 0, "byte_size": 2 * n})
            assert r.status_code == 200, r.text
        before = host_copy_bytes(s)
        infer(s, "add_sub_fp32", [shm_input("INPUT0", "FP32", a.shape, "zsin", n),
                                  shm_input("INPUT1", "FP32", b.shape, "zsin", n, n)],
              [shm_output("OUTPUT0", "zsout", n), shm_output("OUTPUT1", "zsout", n, n)])
        assert host_copy_bytes(s) - before == 0
        np.testing.assert_array_equal(shm.get_contents_as_numpy(sout, np.float32, [2, 16]), w0)
        post(s, "/v2/systemsharedmemory/unregister")
    finally:
        shm.destroy_shared_memory_region(sin)
        shm.destroy_shared_memory_region(sout)

    before = host_copy_bytes(s)
    body = [{"name": "INPUT0", "datatype": "FP32", "shape": [2, 16], "data": a.ravel().tolist()},
            {"name": "INPUT1", "datatype": "FP32", "shape": [2, 16], "data": b.ravel().tolist()}]
    infer(s, "add_sub_fp32", body, outs)
    assert host_copy_bytes(s) - before == 2 * n
    got = cudashm.get_contents_as_numpy(hout, np.float32, [2, 2, 16])
    np.testing.assert_array_equal(got[0], w0)
    post(s, "/v2/cudasharedmemory/unregister")


def test_cuda_shm_requests_batch_on_the_device(start_server, repo, tmp_path, cuda_regions):
    """Four add_sub requests whose inputs and outputs are in CUDA shared
    memory, held until all are queued (PTSERVE_DELAY_SCHEDULER), run as one
    batch of 8: the instance gathers each input device to device into its
    own device buffer (issue 12 part 3: no host copy for a shared-memory
    input), and every request's output rows land in its own region (the
    batch output is split on the host and each slice copied to its region:
    device copies, no host copy either). Values are torch's; the batch
    statistics show the one batch of 8; ptserve_host_copy_bytes_total does
    not move."""
    s = start_server(subset(repo, tmp_path, ["add_sub_fp32"], "dynamic_batching { }"),
                     "--allow-client-shm=true", env={"PTSERVE_DELAY_SCHEDULER": "4"})
    rs = np.random.RandomState(31)
    rows = (1, 2, 2, 3)
    reqs = [(rs.randn(k, 16).astype(np.float32), rs.randn(k, 16).astype(np.float32))
            for k in rows]
    handles = []
    for i, (a, b) in enumerate(reqs):
        n = a.nbytes
        hin = cuda_regions("bin%d" % i, 2 * n)
        hout = cuda_regions("bout%d" % i, 2 * n)
        cudashm.set_shared_memory_region(hin, [a, b])
        assert register_cuda(s, "bin%d" % i, hin, 2 * n).status_code == 200
        assert register_cuda(s, "bout%d" % i, hout, 2 * n).status_code == 200
        handles.append(hout)
    before = host_copy_bytes(s)

    def one(i):
        a, _ = reqs[i]
        n = a.nbytes
        return infer(s, "add_sub_fp32",
                     [shm_input("INPUT0", "FP32", a.shape, "bin%d" % i, n),
                      shm_input("INPUT1", "FP32", a.shape, "bin%d" % i, n, n)],
                     [shm_output("OUTPUT0", "bout%d" % i, n),
                      shm_output("OUTPUT1", "bout%d" % i, n, n)])

    with cf.ThreadPoolExecutor(4) as pool:
        resps = list(pool.map(one, range(4)))
    assert host_copy_bytes(s) - before == 0
    model = load(repo, "add_sub_fp32")
    for (a, b), resp, hout in zip(reqs, resps, handles):
        assert all("data" not in o for o in resp["outputs"]), resp
        with torch.inference_mode():
            w0, w1 = model(torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda())
        got = cudashm.get_contents_as_numpy(hout, np.float32, [2, a.shape[0], 16])
        np.testing.assert_array_equal(got[0], w0.cpu().numpy())
        np.testing.assert_array_equal(got[1], w1.cpu().numpy())
    st = requests.get(s.url + "/v2/models/add_sub_fp32/stats", timeout=TIMEOUT).json()
    sizes = {b["batch_size"] for b in st["model_stats"][0]["batch_stats"]}
    assert sizes == {8}, st
    post(s, "/v2/cudasharedmemory/unregister")
