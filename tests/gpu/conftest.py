"""The GPU suite reuses the end-to-end harness (tests/e2e/conftest.py):
start_server, ptserve_bin and the perf_analyzer helpers. It is loaded under
another module name so the two conftest files do not collide. Beside them:
host_copy_bytes(server), the server's ptserve_host_copy_bytes_total, and
the expectations on conv_probe_cl_graphs that the HTTP and the
shared-memory graph tests share."""
import importlib.util
import os
import re

import requests
import torch

_spec = importlib.util.spec_from_file_location(
    "pts_e2e_harness", os.path.join(os.path.dirname(__file__), "..", "e2e", "conftest.py"))
_harness = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_harness)

ptserve_bin = _harness.ptserve_bin
start_server = _harness.start_server
perf_analyzer_data = _harness.perf_analyzer_data
perf_analyzer_path = _harness.perf_analyzer_path
perf_analyzer_counted = _harness.perf_analyzer_counted


def host_copy_bytes(server):
    """Tensor bytes the server has copied with the CPU so far (its
    ptserve_host_copy_bytes_total), from /metrics."""
    text = requests.get(server.metrics_url, timeout=60).text
    return int(re.search(r"^ptserve_host_copy_bytes_total (\d+)$", text, re.M).group(1))


def check_conv_probe_answer(model, x, out, probe):
    """conv_probe_cl_graphs' answer for the NCHW batch x (host, numpy or
    torch): OUTPUT__0 (out) is torch's own on the same GPU for the batch
    laid out channels-last, and OUTPUT__1 (probe) is 1 for every item, the
    model's word that forward() saw NHWC."""
    x = torch.as_tensor(x)
    with torch.inference_mode():
        want, seen = model(x.cuda().contiguous(memory_format=torch.channels_last))
    assert seen.eq(1.0).all(), "torch's own run must see NHWC"
    out, probe = torch.as_tensor(out), torch.as_tensor(probe)
    batch = x.shape[0]
    assert out.shape == (batch, 8, 16, 16), out.shape
    torch.testing.assert_close(out, want.cpu(), rtol=1e-3, atol=1e-3)
    assert probe.shape == (batch, 1), probe.shape
    assert probe.eq(1.0).all(), (batch, probe)


def assert_graphs_replayed(log, name, sizes):
    """The server's log says instance 0 of model name replayed its CUDA
    graph for each batch size in sizes."""
    for size in sizes:
        assert ("'%s', instance '%s_0_0': replaying the CUDA graph for batch size %d"
                % (name, name, size)) in log, log
