"""The GPU suite reuses the end-to-end harness (tests/e2e/conftest.py):
start_server, ptserve_bin, perf_analyzer_data. It is loaded under another module name so the
two conftest files do not collide."""
import importlib.util
import os

_spec = importlib.util.spec_from_file_location(
    "pts_e2e_harness", os.path.join(os.path.dirname(__file__), "..", "e2e", "conftest.py"))
_harness = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_harness)

ptserve_bin = _harness.ptserve_bin
start_server = _harness.start_server
perf_analyzer_data = _harness.perf_analyzer_data
