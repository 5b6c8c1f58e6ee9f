"""bench/gpu/loopback.c (bench_loopback): the GPU bench's floor of TCP over
loopback under a batch-1 request. Built next to ptserve. These tests check
its contract with bench/gpu/run.py and report.py: the CSV it appends, the
sizes it was asked for, and that it refuses to run without them."""
import csv
import os
import subprocess

import pytest


@pytest.fixture(scope="session")
def loopback_bin(ptserve_bin):
    path = os.path.join(os.path.dirname(ptserve_bin), "bench_loopback")
    assert os.path.exists(path), "bench_loopback not found at %s (build its target)" % path
    return path


def run(loopback_bin, *args):
    return subprocess.run([loopback_bin] + [str(a) for a in args], capture_output=True,
                          text=True, timeout=60)


def test_rounds_of_the_asked_sizes_appended_to_one_csv(loopback_bin, tmp_path):
    out = tmp_path / "loopback.csv"
    for label, request, response in (("body", 301440, 2320), ("no_body", 640, 320)):
        proc = run(loopback_bin, "--label", label, "--request", request, "--response", response,
                   "--seconds", 0.3, "--csv", out)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.startswith("%s,%d,%d," % (label, request, response))
    with open(out, newline="") as f:
        rows = list(csv.DictReader(f))
    # One header for both runs: the second appended its row under it.
    assert [r["label"] for r in rows] == ["body", "no_body"]
    assert [(int(r["request_bytes"]), int(r["response_bytes"])) for r in rows] == \
        [(301440, 2320), (640, 320)]
    for r in rows:
        assert int(r["rounds"]) > 0
        # A round trip over loopback takes microseconds, not nothing and
        # not a second; p50 is no later than p90.
        assert 0 < float(r["p50_us"]) <= float(r["p90_us"]) < 1e6


def test_answer_after_holds_each_answer_and_is_taken_off(loopback_bin, tmp_path):
    out = tmp_path / "loopback.csv"
    proc = run(loopback_bin, "--label", "idle", "--request", 640, "--response", 320,
               "--answer-after-us", 2000, "--seconds", 0.3, "--csv", out)
    assert proc.returncode == 0, proc.stderr
    with open(out, newline="") as f:
        (row,) = list(csv.DictReader(f))
    assert float(row["answer_after_us"]) == 2000
    # Each measured round held its answer 2 ms: at most 0.3 s / 2 ms of
    # them fit in the 0.3 s (answered at once, thousands would).
    assert 0 < int(row["rounds"]) <= 151
    # The 2 ms are taken off: what is left is the round trip itself.
    assert 0 < float(row["p50_us"]) < 2000


@pytest.mark.parametrize("args", [(), ("--request", 100), ("--request", 100, "--response", 0),
                                  ("--request", 100, "--response", 10, "--seconds", 0),
                                  ("--request", 100, "--response", 10, "--answer-after-us", -1)])
def test_refuses_without_sizes_and_time(loopback_bin, args):
    proc = run(loopback_bin, *args)
    assert proc.returncode == 2
    assert "usage: bench_loopback" in proc.stderr
