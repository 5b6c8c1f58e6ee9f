"""AOTInductor packages on CUDA: a package compiled for the GPU at test time
(examples/export_aoti.py, device="cuda"), served on KIND_GPU instances —
each on its own stream — with dynamic batching, warmup, CUDA graphs and
config auto-complete. Expected answers come from the module the package was
exported from, run eagerly by torch on the same GPU. Run by tests/gpu/run.sh
on a GPU host (CI has none)."""
import concurrent.futures as cf
import os
import shutil
import sys

import pytest
import requests
import torch

from test_cuda import infer

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples"))
from export_aoti import export_package  # noqa: E402


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(64, 256)
        self.fc2 = torch.nn.Linear(256, 8)

    def forward(self, x):
        return torch.softmax(self.fc2(torch.relu(self.fc1(x))), dim=1)


def module():
    torch.manual_seed(21)
    return Mlp().eval().cuda()


IO = ('input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 64 ] } ]\n'
      'output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 8 ] } ]\n')

CONFIGS = {
    "aoti": IO + "instance_group [ { count: 2, kind: KIND_GPU } ]\ndynamic_batching { }",
    "aoti_graphs": IO + 'instance_group [ { count: 1, kind: KIND_GPU } ]\n'
                        'parameters { key: "CUDA_GRAPH_BATCH_SIZES" value: { string_value: "1,4" } }',
    "aoti_warmup": IO + 'instance_group [ { count: 1, kind: KIND_GPU } ]\n'
                        'model_warmup [ { name: "w" batch_size: 8 count: 2 inputs { key: "INPUT__0" '
                        'value: { data_type: TYPE_FP32 dims: [ 64 ] random_data: true } } } ]',
    "aoti_auto": "",  # inputs, outputs and the instance kind come from the package
    "aoti_cpu_kind": IO + "instance_group [ { count: 1, kind: KIND_CPU } ]",
}


@pytest.fixture(scope="session")
def package(tmp_path_factory):
    out = tmp_path_factory.mktemp("aoti_gpu")
    path = str(out / "mlp_cuda.pt2")
    export_package(module(), (torch.zeros(2, 64),), path=path, batch_max=64, device="cuda")
    return path


def repo_of(package, tmp_path, names):
    for name in names:
        d = tmp_path / "repo" / name
        (d / "1").mkdir(parents=True)
        shutil.copyfile(package, str(d / "1" / "model.pt2"))
        (d / "config.pbtxt").write_text('name: "%s"\nplatform: "torch_aoti"\nmax_batch_size: 8\n%s\n'
                                        % (name, CONFIGS[name]))
    return str(tmp_path / "repo")


def want(x):
    with torch.inference_mode():
        return module()(x.cuda()).cpu()


def test_aoti_on_gpu_matches_torch_with_a_stream_per_instance(start_server, package, tmp_path):
    s = start_server(repo_of(package, tmp_path, ["aoti"]))
    log = s.log()
    assert log.count("Loaded AOTInductor package from: ") == 2, log
    assert "on device: cuda:0" in log, log
    g = torch.Generator().manual_seed(3)
    xs = [torch.randn(1 + i % 8, 64, generator=g) for i in range(32)]
    with cf.ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda x: infer(s.url, "aoti", [("INPUT__0", x)], ["OUTPUT__0"]), xs))
    for x, out in zip(xs, got):
        assert torch.allclose(out["OUTPUT__0"], want(x), atol=1e-6), \
            (out["OUTPUT__0"] - want(x)).abs().max()


def test_aoti_cuda_graph_replay_equals_eager(start_server, package, tmp_path):
    s = start_server(repo_of(package, tmp_path, ["aoti", "aoti_graphs"]))
    log = s.log()
    assert "captured a CUDA graph for batch size 1" in log, log
    assert "captured a CUDA graph for batch size 4" in log, log
    g = torch.Generator().manual_seed(11)
    for batch in (1, 4, 3):  # 3 has no graph: eager
        for _ in range(3):
            x = torch.randn(batch, 64, generator=g)
            eager = infer(s.url, "aoti", [("INPUT__0", x)], ["OUTPUT__0"])["OUTPUT__0"]
            graph = infer(s.url, "aoti_graphs", [("INPUT__0", x)], ["OUTPUT__0"])["OUTPUT__0"]
            assert torch.equal(graph, eager), (batch, (graph - eager).abs().max())
            assert torch.allclose(graph, want(x), atol=1e-6)
    assert "replaying the CUDA graph for batch size 1" in s.log(), s.log()
    assert "replaying the CUDA graph for batch size 4" in s.log(), s.log()


def test_aoti_warmup_and_auto_complete_on_gpu(start_server, package, tmp_path):
    s = start_server(repo_of(package, tmp_path, ["aoti_warmup", "aoti_auto"]))
    assert "warmup 'w' ran 2 time(s) at batch size 8" in s.log(), s.log()
    cfg = requests.get(s.url + "/v2/models/aoti_auto/config", timeout=30).json()
    assert cfg["instance_group"][0]["kind"] == "KIND_GPU", cfg
    assert [(i["name"], i["dims"]) for i in cfg["input"]] == [("ARGS[0]", [64])], cfg
    assert [(o["name"], o["dims"]) for o in cfg["output"]] == [("RESULT", [8])], cfg
    x = torch.randn(5, 64, generator=torch.Generator().manual_seed(5))
    for name, i, o in (("aoti_warmup", "INPUT__0", "OUTPUT__0"), ("aoti_auto", "ARGS[0]", "RESULT")):
        got = infer(s.url, name, [(i, x)], [o])[o]
        assert torch.allclose(got, want(x), atol=1e-6), (name, (got - want(x)).abs().max())


def test_cuda_package_on_a_cpu_instance_fails_naming_both(start_server, package, tmp_path):
    s = start_server(repo_of(package, tmp_path, ["aoti", "aoti_cpu_kind"]),
                     "--exit-on-error=false", expect_ready=False)
    index = {m["name"]: m for m in requests.post(s.url + "/v2/repository/index", timeout=30).json()}
    assert index["aoti"]["state"] == "READY", index
    bad = index["aoti_cpu_kind"]
    assert bad["state"] == "UNAVAILABLE", bad
    assert ("the package was compiled for cuda, but instance group 'aoti_cpu_kind_0' is KIND_CPU "
            "(cpu)") in bad["reason"], bad
