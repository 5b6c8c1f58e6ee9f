"""The GPU suite reuses the end-to-end harness (tests/e2e/conftest.py):
start_server, ptserve_bin and the perf_analyzer helpers. It is loaded under
another module name so the two conftest files do not collide. Beside them:
host_copy_bytes(server), the server's ptserve_host_copy_bytes_total."""
import importlib.util
import os
import re

import requests

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
