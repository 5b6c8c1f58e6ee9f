"""Placement on a second GPU (needs a host with two or more CUDA devices;
tests/gpu/results/ keeps the log of the run on a two-GPU H200 host)."""
import pytest
import torch

from test_cuda import infer, load, repo, subset  # noqa: F401 (repo is a fixture)

if torch.cuda.device_count() < 2:
    pytest.skip("needs two CUDA devices; this host has %d" % torch.cuda.device_count(),
                allow_module_level=True)


def test_model_traced_on_gpu0_serves_from_gpu1(start_server, repo, tmp_path):
    s = start_server(subset(repo, tmp_path, ["mlp_gpu1"]))
    log = s.log()
    assert "PyTorch instance initialized on device: cuda:1" in log, log
    assert "on device: cuda:0" not in log, log
    model = torch.jit.load(repo + "/mlp_gpu1/1/model.pt", map_location="cuda:1").eval()
    x = torch.randn(6, 64, generator=torch.Generator().manual_seed(2))
    got = infer(s.url, "mlp_gpu1", [("INPUT__0", x)], ["OUTPUT__0"])["OUTPUT__0"]
    with torch.inference_mode():
        want = model(x.cuda(1)).cpu()
    assert torch.allclose(got, want, atol=1e-6), (got - want).abs().max()


def test_gpu_group_without_ids_uses_every_gpu(start_server, repo, tmp_path):
    s = start_server(subset(repo, tmp_path, ["mlp_all_gpus"]))
    log = s.log()
    for d in range(torch.cuda.device_count()):
        assert "PyTorch instance initialized on device: cuda:%d" % d in log, log
    cfg = __import__("requests").get(s.url + "/v2/models/mlp_all_gpus/config", timeout=10).json()
    assert cfg["instance_group"][0]["gpus"] == list(range(torch.cuda.device_count())), cfg
    model = load(repo, "mlp_all_gpus")
    for i in range(8):  # requests spread over the instances: every answer right
        x = torch.randn(3, 64, generator=torch.Generator().manual_seed(i))
        got = infer(s.url, "mlp_all_gpus", [("INPUT__0", x)], ["OUTPUT__0"])["OUTPUT__0"]
        with torch.inference_mode():
            want = model(x.cuda()).cpu()
        assert torch.allclose(got, want, atol=1e-6)
