"""Poll mode under traffic: the repository changes on disk while clients
infer, and nothing they send is refused or answered wrongly.

ptserve polls a temporary repository every second (--model-control-mode=
poll --repository-poll-secs=1). Four clients (2 HTTP, 2 gRPC: the clients
and tally of traffic_util, shared with test_model_reload_load.py) infer
against model `a`, a TorchScript model whose version v computes
x * (v + 1) + 0.5, while the test, one step at a time:

  1. rewrites a's config.pbtxt (max_batch_size 8 -> 4: harmless for the
     clients' batch of 1, and visible in the model's config): a reload of
     version 1 in place;
  2. adds version 2 (moved in whole): version 2 serves, version 1 is
     unloaded;
  3. adds version 3 with a truncated model.pt (a writer half-way): the
     reload fails, version 2 serves on, the index says why;
  4. completes version 3's model.pt in place: the next poll loads it,
     version 2 goes;
  5. adds an identity model `b` (moved in whole): it loads and answers;
  6. removes `b`: it is unloaded and leaves the index.

After each step the test waits (with a deadline, polling the index) for
the index to show the expected versions and states, then for the clients
to complete more requests, so every change overlaps traffic.

Asserted: no request on `a` refused or failed (no 4xx, 5xx, transport
error or hang) across all six steps; every answer is the expected value
for the version that answered it, computed here (x * (v + 1) + 0.5 on
integer-valued inputs: exact in float32), and versions 1, 2 and 3 each
answered; the half-written version never takes `a` down; the server stops
cleanly (this file runs under ASan+UBSan in `make asan`).
"""
import json
import os
import shutil
import time

import numpy as np
import requests

from conftest import assert_clean_exit, wait_for
from scale_model import scripted_bytes
from traffic_util import TIMEOUT, Target, run_phase

A_CONFIG = """name: "a"
backend: "pytorch"
max_batch_size: %d
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 4 ] } ]
"""

B_CONFIG = """name: "b"
backend: "identity"
max_batch_size: 4
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 2 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 2 ] } ]
"""


WAIT_S = TIMEOUT  # how long a state change may take here


def model_bytes(version):
    """Version v of `a`: x * (v + 1) + 0.5, as a TorchScript file."""
    return scripted_bytes(float(version + 1))


def expect(values, version):
    """What version `version` (a string) answers, computed here: integer
    inputs times an integer plus 0.5 are exact in float32."""
    return values * np.float32(int(version) + 1) + np.float32(0.5)


TARGET = Target(
    "a",
    values=lambda rng: rng.integers(-1000, 1000, size=(1, 4)).astype(np.float32),
    expect=expect,
    refusal=r"'a'.*(UNLOADING|UNAVAILABLE|LOADING|not loaded)",
    datatype="FP32", shape=(1, 4), input_name="INPUT__0", output_name="OUTPUT__0")


def states(server, name):
    """(version, state, reason) of each index entry of `name`, or None
    when the index does not list it."""
    r = requests.post(server.url + "/v2/repository/index", timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    got = [(e.get("version"), e.get("state"), e.get("reason", "")) for e in r.json()
           if e["name"] == name]
    return got or None


def move_in(stage, path):
    """Moves a directory written under `stage` to `path` in one rename, so
    a poll sees it whole or not at all."""
    os.rename(stage, path)


def test_poll_mode_under_traffic_drops_nothing(start_server, tmp_path):
    repo, stage = tmp_path / "repo", tmp_path / "stage"
    os.makedirs(repo / "a" / "1")
    os.makedirs(stage)
    (repo / "a" / "config.pbtxt").write_text(A_CONFIG % 8)
    (repo / "a" / "1" / "model.pt").write_bytes(model_bytes(1))
    s = start_server(repo, "--model-control-mode=poll", "--repository-poll-secs=1")
    assert states(s, "a") == [("1", "READY", "")]
    seen = {}

    def a_config():
        r = requests.get(s.url + "/v2/models/a/config", timeout=TIMEOUT)
        assert r.status_code == 200, r.text
        return r.json()

    def control(tally):
        # 1. A changed config: version 1 reloaded in place.
        (repo / "a" / "config.pbtxt").write_text(A_CONFIG % 4)
        wait_for("a's new config", lambda: a_config()["max_batch_size"] == 4, timeout=WAIT_S)
        assert states(s, "a") == [("1", "READY", "")]
        tally.wait_for_more(8)

        # 2. A new version, moved in whole.
        os.makedirs(stage / "2")
        (stage / "2" / "model.pt").write_bytes(model_bytes(2))
        move_in(stage / "2", repo / "a" / "2")
        wait_for("a version 2", lambda: states(s, "a") == [("1", "UNAVAILABLE", "unloaded"),
                                                           ("2", "READY", "")],
                 timeout=WAIT_S)
        tally.wait_for_more(8)

        # 3. Version 3, its model file half-written: the reload fails, and
        # version 2 serves on with the failure in the index.
        full = model_bytes(3)
        os.makedirs(stage / "3")
        (stage / "3" / "model.pt").write_bytes(full[: len(full) // 2])
        move_in(stage / "3", repo / "a" / "3")

        def failed():
            st = states(s, "a")
            return len(st) == 3 and st[2][1] == "UNAVAILABLE" and \
                st[1][1] == "READY" and \
                st[1][2].startswith("the last load failed, the previously loaded versions "
                                    "still serve: ") and st
        seen["failed"] = wait_for("the failed reload of a version 3", failed, timeout=WAIT_S)
        tally.wait_for_more(8)

        # 4. The writer is done: the next poll loads version 3.
        (repo / "a" / "3" / "model.pt").write_bytes(full)
        wait_for("a version 3", lambda: states(s, "a") == [("1", "UNAVAILABLE", "unloaded"),
                                                           ("2", "UNAVAILABLE", "unloaded"),
                                                           ("3", "READY", "")],
                 timeout=WAIT_S)
        tally.wait_for_more(8)

        # 5. A model added beside it, moved in whole.
        os.makedirs(stage / "b" / "1")
        (stage / "b" / "config.pbtxt").write_text(B_CONFIG)
        move_in(stage / "b", repo / "b")
        wait_for("b loaded", lambda: states(s, "b") == [("1", "READY", "")], timeout=WAIT_S)
        body = {"inputs": [{"name": "INPUT0", "datatype": "INT32", "shape": [1, 2],
                            "data": [7, -7]}]}
        r = requests.post(s.url + "/v2/models/b/infer", data=json.dumps(body), timeout=TIMEOUT)
        assert r.status_code == 200, r.text
        assert r.json()["outputs"][0]["data"] == [7, -7]
        tally.wait_for_more(8)

        # 6. ... and removed.
        shutil.rmtree(repo / "b")
        wait_for("b gone from the index", lambda: states(s, "b") is None, timeout=WAIT_S)
        tally.wait_for_more(8)

    started = time.time()
    tally = run_phase(s, TARGET, control)
    took = time.time() - started
    # Model a: every request answered, correctly, by every version in turn.
    assert tally.problems == [], tally.problems[:10]
    assert tally.refused == 0  # the half-written version never took a down
    assert set(tally.versions) == {"1", "2", "3"}, tally.versions
    # While version 3 was half-written, the index said why, on version 3
    # and on version 2, which served on.
    v1, v2, v3 = seen["failed"]
    assert v1 == ("1", "UNAVAILABLE", "unloaded")
    assert v3[0] == "3" and v3[2].startswith(
        "Unavailable: unable to load model 'a': failed to load TorchScript model '%s': "
        % (repo / "a" / "3" / "model.pt")), v3
    assert v2[2].startswith("the last load failed, the previously loaded versions still serve: "
                            "load failed for model 'a': version 3 is at UNAVAILABLE state: "
                            + v3[2][:100]), v2
    assert states(s, "a") == [("1", "UNAVAILABLE", "unloaded"), ("2", "UNAVAILABLE", "unloaded"),
                              ("3", "READY", "")]
    print("\npoll under traffic: %d answers (%s) in %.1f s, none refused"
          % (tally.ok, dict(sorted(tally.versions.items())), took))
    assert_clean_exit(s)
