"""Helpers of tests/deploy (a module of its own, not conftest.py, so that the
e2e suite's `from conftest import ...` never meets this one).

  ROOT             the repository root
  needs_root()     these tests make chroots, mounts and network namespaces: they
                   run as root (CI does); elsewhere they are skipped, saying why,
                   except where PTS_REQUIRE_ROOT=1 (.ci/run sets it): there a
                   runner without root fails them, so CI can not go green
                   without them
  free_port()      a free TCP port on 127.0.0.1 (tests/ports.py)
  wait_for(pred, timeout, what, log=None)
                   polls pred() until it is true; fails naming `what` (and
                   printing `log()`) when it is not within timeout seconds
  serving(url, proc, log)
                   a wait_for predicate: url's /v2/health/ready answers 200;
                   fails at once, with log(), when proc has exited
"""
import os
import sys
import time

import pytest
import requests

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from ports import free_port  # noqa: E402,F401 (the tests import it from here)


def needs_root():
    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        why = "needs root on Linux (chroot, mount and network namespaces)"
        if os.environ.get("PTS_REQUIRE_ROOT") == "1":
            pytest.fail(why + "; PTS_REQUIRE_ROOT=1 says this runner must run it")
        pytest.skip(why + "; CI runs as root")


def serving(url, proc, log):
    def ready():
        assert proc.poll() is None, "exited with %s\n%s" % (proc.returncode, log())
        try:
            return requests.get(url + "/v2/health/ready", timeout=2).status_code == 200
        except requests.ConnectionError:
            return False
    return ready


def wait_for(pred, timeout, what, log=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.05)
    raise AssertionError("%s: not within %ss%s" % (what, timeout, "\n" + log() if log else ""))
