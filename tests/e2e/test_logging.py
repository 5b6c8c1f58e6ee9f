"""The logging extension (GET/POST /v2/logging), end to end.

Expected documents and refusals follow protocol-facts §1.13 and Triton's
qa/L0_logging (its text for log_file). That the settings act live is read
from the server's log file: verbose lines appear only with a verbose level,
info lines vanish with log_info false, ISO8601 changes the line prefix.
"""
import json
import os
import re

import requests

from conftest import ROOT

REPO = os.path.join(ROOT, "tests", "e2e", "repos", "identity")
TIMEOUT = 10
# A verbose line the scheduler writes for every batch (level 1).
VERBOSE_MARK = "runs 1 requests"
# An info line: arming the operator profiler through the trace setting.
INFO_MARK = "with the operator profiler"


def logging(server, body=None):
    if body is None:
        return requests.get(server.url + "/v2/logging", timeout=TIMEOUT)
    return requests.post(server.url + "/v2/logging", data=json.dumps(body), timeout=TIMEOUT)


def infer(server):
    r = requests.post(server.url + "/v2/models/id_fp32/infer", timeout=TIMEOUT, json={
        "inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 4], "data": [1, 2, 3, 4]}]})
    assert r.status_code == 200, r.text


def arm_profiler(server):
    r = requests.post(server.url + "/v2/models/id_fp32/trace/setting", timeout=TIMEOUT,
                      json={"profile_executions": "1"})
    assert r.status_code == 200, r.text


def read(path):
    """The log file as it is now. The server writes and flushes each line
    before it answers the request that caused it (the scheduler's verbose
    line before the model runs, the profiler's info line before the trace
    setting's reply), so it is complete when the answer has arrived."""
    with open(path) as f:
        return f.read()


def test_logging_settings_and_effect(start_server, tmp_path):
    log_file = str(tmp_path / "server.log")
    server = start_server(REPO, "--log-file", log_file, "--profile-dir", str(tmp_path))
    default = {"log_file": log_file, "log_info": True, "log_warning": True, "log_error": True,
               "log_verbose_level": 0, "log_format": "default"}
    assert logging(server).json() == default

    # Verbose level 0: no verbose lines for an inference.
    infer(server)
    assert VERBOSE_MARK not in read(log_file)
    r = logging(server, {"log_verbose_level": 1})
    assert r.status_code == 200 and r.json() == dict(default, log_verbose_level=1)
    infer(server)
    assert VERBOSE_MARK in read(log_file)
    assert logging(server, {"log_verbose_level": 0}).json()["log_verbose_level"] == 0
    before = read(log_file).count(VERBOSE_MARK)
    infer(server)
    assert read(log_file).count(VERBOSE_MARK) == before

    # log_info false silences info lines; true brings them back.
    assert logging(server, {"log_info": False}).json()["log_info"] is False
    arm_profiler(server)
    assert INFO_MARK not in read(log_file)
    assert logging(server, {"log_info": True}).json()["log_info"] is True
    arm_profiler(server)
    assert INFO_MARK in read(log_file)

    # ISO8601: "2026-11-21T10:15:35Z I <tid> file:line] ..."
    assert logging(server, {"log_format": "ISO8601"}).json()["log_format"] == "ISO8601"
    arm_profiler(server)
    iso = [l for l in read(log_file).splitlines() if INFO_MARK in l][-1]
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ I \d+ ", iso), iso
    assert logging(server, {"log_format": "default"}).status_code == 200

    # null values are ignored.
    assert logging(server, {"log_info": None, "log_verbose_level": None}).json() == default

    # Refusals name the setting and change nothing.
    r = logging(server, {"log_file": "other.log"})
    assert r.status_code == 501
    assert r.json() == {"error": "log file location can not be updated through network protocol"}
    for bad, word in [({"log_verbose_level": -1}, "log_verbose_level"),
                      ({"log_verbose_level": "1"}, "log_verbose_level"),
                      ({"log_info": "yes"}, "log_info"), ({"log_format": "XML"}, "XML"),
                      ({"log_warnings": True}, "log_warnings"),
                      ({"log_error": False, "log_format": "XML"}, "XML")]:
        r = logging(server, bad)
        assert r.status_code == 400 and word in r.json()["error"], (bad, r.text)
    r = requests.post(server.url + "/v2/logging", data="[1]", timeout=TIMEOUT)
    assert r.status_code == 400
    assert logging(server).json() == default
    assert requests.put(server.url + "/v2/logging", timeout=TIMEOUT).status_code == 405
    assert "logging" in requests.get(server.url + "/v2", timeout=TIMEOUT).json()["extensions"]
    assert server.stop() == 0


def test_startup_names_the_allocator_in_use(start_server, ptserve_bin):
    """The startup line names the malloc that serves the process, and it is
    the one the process has mapped: jemalloc in a normal build (setup.sh
    installs it; CMakeLists.txt links it), the C library's under the
    sanitizers, which bring their own."""
    server = start_server(REPO)
    lines = [l for l in server.log().splitlines() if "Memory allocator:" in l]
    assert len(lines) == 1, server.log()
    with open("/proc/%d/maps" % server.proc.pid) as f:
        mapped = "libjemalloc" in f.read()
    assert ("jemalloc" in lines[0]) == mapped, lines[0]
    with open(ptserve_bin, "rb") as f:
        sanitized = b"__asan_init" in f.read()
    assert mapped == (not sanitized), (lines[0], "sanitized" if sanitized else "normal build")
    if mapped:
        # ptserve's own setting: freed pages stay for reuse (main.c,
        # malloc_conf), and MALLOC_CONF in the environment overrides it.
        assert lines[0].endswith("(dirty_decay_ms -1)"), lines[0]
        assert server.stop() == 0
        server = start_server(REPO, env={"MALLOC_CONF": "dirty_decay_ms:10000"})
        (line,) = [l for l in server.log().splitlines() if "Memory allocator:" in l]
        assert line.endswith("(dirty_decay_ms 10000)"), line
