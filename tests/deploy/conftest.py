"""Fixtures of tests/deploy: the deployment artefacts of deploy/ and
scripts/rootfs.sh, exercised on this machine (helpers: deployutil.py).

  ptserve_bin      the binary under test ($PTSERVE_BIN or build/ptserve)
"""
import os

import pytest

from deployutil import ROOT


@pytest.fixture(scope="session")
def ptserve_bin():
    path = os.environ.get("PTSERVE_BIN", os.path.join(ROOT, "build", "ptserve"))
    assert os.path.exists(path), "ptserve binary not found at %s (build first)" % path
    return path
