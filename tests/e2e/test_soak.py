"""Soak: concurrent clients send a mix of valid and invalid requests for
PTS_SOAK_SECONDS (default 20) against one server, while the model most of
the valid requests go to (id_fp32) is reloaded again and again through the
repository API (explicit mode; tests/e2e/test_model_reload_load.py is the
reload soak proper).

An abuser thread repeats the overload patterns beside them (idle
connections, bodies abandoned half-way, a client that never reads its
answer; tests/e2e/test_overload.py has each alone).

Pass criteria: every valid request gets its full, correct answer (zero
lost, reloads included); every invalid one gets its 4xx with a JSON error;
the request bytes held return to zero once the abuser lets go;
every reload succeeds; the server never dies and exits 0 on SIGTERM with a
clean sanitizer report; resident memory after the warm-up stays flat
(growth reported, bounded).

With PTS_SOAK_REPORT=<path> the figures are written there as JSON
(scripts/reliability-report.sh uses this for docs/reliability.md).
"""
import gzip
import json
import os
import random
import socket
import struct
import threading
import time

import requests

from conftest import rss_kb

SECONDS = float(os.environ.get("PTS_SOAK_SECONDS", "20"))
CLIENTS = 8
MAX_INPUT = 1 << 20
# Resident-memory growth allowed between the end of the warm-up and the end.
RSS_GROWTH_LIMIT_KB = 48 * 1024


def metric(server, name):
    """An unlabelled ptserve_* sample of /metrics."""
    for line in requests.get(server.metrics_url, timeout=10).text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError("%s not in /metrics" % name)


class Progress:
    """Requests completed by all clients, for the reloader to pace itself
    by (no clock: it waits for traffic between two reloads)."""

    def __init__(self):
        self.cond = threading.Condition()
        self.n = 0

    def add(self):
        with self.cond:
            self.n += 1
            self.cond.notify_all()

    def wait_for_more(self, k, deadline):
        with self.cond:
            target = self.n + k
            self.cond.wait_for(lambda: self.n >= target or time.time() >= deadline,
                               timeout=max(0.0, deadline - time.time()))


def reloader(url, deadline, progress, result):
    """Reloads id_fp32 until the deadline, after every 20 completed requests;
    result["reloads"] counts them, result["failures"] keeps what went wrong."""
    with requests.Session() as s:
        while time.time() < deadline:
            progress.wait_for_more(20, deadline)
            if time.time() >= deadline:
                break
            try:
                r = s.post(url + "/v2/repository/models/id_fp32/load", timeout=60)
                if r.status_code == 200:
                    result["reloads"] += 1
                else:
                    result["failures"].append("reload: HTTP %d %s" % (r.status_code, r.text))
            except requests.RequestException as e:
                result["failures"].append("reload: %r" % e)


def abuser(port, deadline, progress, result):
    """The overload issue's patterns, small, over and over beside the valid
    traffic: idle connections, bodies abandoned half-way, and a client that
    sends an inference and never reads the answer. Each round waits for
    traffic, then lets go of everything. The test checks afterwards that the
    server holds no request bytes any more and that no valid request was
    refused on their account."""
    header = json.dumps({"inputs": [{"name": "INPUT0", "datatype": "FP32",
                                     "shape": [1, 100_000],
                                     "parameters": {"binary_data_size": 400_000}}],
                         "outputs": [{"name": "OUTPUT0",
                                      "parameters": {"binary_data": True}}]}).encode()
    infer = (b"POST /v2/models/dt_fp32/infer HTTP/1.1\r\nHost: t\r\n"
             b"Inference-Header-Content-Length: %d\r\nContent-Length: %d\r\n\r\n"
             % (len(header), len(header) + 400_000)) + header + b"\0" * 400_000
    while time.time() < deadline:
        held = []
        try:
            for _ in range(10):  # idle
                held.append(socket.create_connection(("127.0.0.1", port)))
            for _ in range(4):  # half a declared 800 kB body
                sock = socket.create_connection(("127.0.0.1", port))
                sock.sendall(b"POST /v2/models/dt_fp32/infer HTTP/1.1\r\nHost: t\r\n"
                             b"Content-Length: 800000\r\n\r\n" + b"\0" * 400_000)
                held.append(sock)
            sock = socket.socket()  # a reader that never reads
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.connect(("127.0.0.1", port))
            sock.sendall(infer)
            held.append(sock)
            result["rounds"] += 1
        except OSError as e:
            result["failures"].append("abuser: %r" % e)
        progress.wait_for_more(40, deadline)
        for sock in held:
            sock.close()


# --------------------------------------------------------------- the mix
# Each function sends one request and returns (kind, ok): kind "valid" or
# "invalid", ok whether the answer was exactly what that request deserves.

def valid_json(s, url, rng):
    batch = rng.randint(1, 8)
    data = [float(rng.randint(-1000, 1000)) / 4 for _ in range(batch * 4)]
    body = {"id": str(rng.random()), "inputs": [{"name": "INPUT0", "datatype": "FP32",
                                                 "shape": [batch, 4], "data": data}]}
    r = s.post(url + "/v2/models/id_fp32/infer", json=body, timeout=30)
    out = r.json() if r.status_code == 200 else {}
    return "valid", (r.status_code == 200 and out["id"] == body["id"]
                     and out["outputs"][0]["shape"] == [batch, 4]
                     and out["outputs"][0]["data"] == data)


def valid_binary_bytes(s, url, rng):
    items = [bytes(rng.randrange(256) for _ in range(rng.randint(0, 40)))
             for _ in range(rng.randint(1, 6))]
    raw = b"".join(struct.pack("<I", len(x)) + x for x in items)
    hdr = json.dumps({"inputs": [{"name": "INPUT0", "datatype": "BYTES", "shape": [1, len(items)],
                                  "parameters": {"binary_data_size": len(raw)}}],
                      "outputs": [{"name": "OUTPUT0",
                                   "parameters": {"binary_data": True}}]}).encode()
    r = s.post(url + "/v2/models/dt_bytes/infer", data=hdr + raw, timeout=30,
               headers={"Inference-Header-Content-Length": str(len(hdr))})
    if r.status_code != 200:
        return "valid", False
    n = int(r.headers["Inference-Header-Content-Length"])
    return "valid", r.content[n:] == raw


def valid_gzip(s, url, rng):
    data = [rng.randint(-2 ** 31, 2 ** 31 - 1) for _ in range(4)]
    body = {"inputs": [{"name": "INPUT0", "datatype": "INT32", "shape": [1, 4], "data": data}]}
    r = s.post(url + "/v2/models/dt_int32/infer", data=gzip.compress(json.dumps(body).encode()),
               headers={"Content-Encoding": "gzip", "Accept-Encoding": "gzip"}, timeout=30)
    return "valid", r.status_code == 200 and r.json()["outputs"][0]["data"] == data


def valid_metadata(s, url, rng):
    path = rng.choice(["/v2/health/ready", "/v2/health/live", "/v2", "/v2/models/id_fp32",
                       "/v2/models/id_fp32/config", "/v2/models/id_fp32/ready"])
    r = s.get(url + path, timeout=30)
    return "valid", r.status_code == 200, "GET %s: %d %s" % (path, r.status_code, r.text[:300])


def expect_error(r, code):
    try:
        return r.status_code == code and "error" in r.json()
    except ValueError:
        return False


def invalid_json(s, url, rng):
    body = rng.choice([b"{", b"[]", b'{"inputs":7}', b'{"inputs":[{"name":1}]}', b"\xff\xfe"])
    r = s.post(url + "/v2/models/id_fp32/infer", data=body, timeout=30)
    return "invalid", expect_error(r, 400)


def invalid_shape(s, url, rng):
    body = {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 5],
                        "data": [0.0] * 5}]}
    return "invalid", expect_error(s.post(url + "/v2/models/id_fp32/infer", json=body,
                                          timeout=30), 400)


def invalid_model(s, url, rng):
    r = s.post(url + "/v2/models/nope%d/infer" % rng.randint(0, 9), json={"inputs": []},
               timeout=30)
    return "invalid", expect_error(r, 404)


def invalid_name(s, url, rng):
    r = s.get(url + "/v2/models/..%2F..%2Fetc/config", timeout=30)
    return "invalid", expect_error(r, 400)


def invalid_too_large(s, url, rng):
    r = s.post(url + "/v2/models/id_fp32/infer", data=b" " * (MAX_INPUT + 1000), timeout=30)
    return "invalid", expect_error(r, 413)


def invalid_truncated_binary(s, url, rng):
    hdr = json.dumps({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 4],
                                  "parameters": {"binary_data_size": 16}}]}).encode()
    r = s.post(url + "/v2/models/id_fp32/infer", data=hdr + b"\0" * 7, timeout=30,
               headers={"Inference-Header-Content-Length": str(len(hdr))})
    return "invalid", expect_error(r, 400)


def invalid_method(s, url, rng):
    return "invalid", expect_error(s.delete(url + "/v2/models/id_fp32", timeout=30), 405)


def invalid_raw(s, url, rng):
    """Garbage or a request cut off mid-body on a raw socket; the server may
    answer or close, and must stay up (checked by the valid requests)."""
    host, port = url.split("//")[1].split(":")
    with socket.create_connection((host, int(port)), timeout=10) as c:
        if rng.random() < 0.5:
            c.sendall(bytes(rng.randrange(256) for _ in range(rng.randint(1, 300))) + b"\r\n\r\n")
        else:
            c.sendall(b"POST /v2/models/id_fp32/infer HTTP/1.1\r\nHost: x\r\n"
                      b"Content-Length: 1000\r\n\r\n{\"inputs\":")
        c.shutdown(socket.SHUT_WR)
        try:
            while c.recv(4096):
                pass
        except OSError:
            pass
    return "invalid", True


MIX = [(valid_json, 30), (valid_binary_bytes, 15), (valid_gzip, 10), (valid_metadata, 10),
       (invalid_json, 6), (invalid_shape, 6), (invalid_model, 5), (invalid_name, 4),
       (invalid_too_large, 2), (invalid_truncated_binary, 5), (invalid_method, 4),
       (invalid_raw, 3)]


def client(url, seed, deadline, stats, lock, progress):
    rng = random.Random(seed)
    funcs = [f for f, w in MIX for _ in range(w)]
    # Half the clients keep connections alive, half open one per request.
    session = requests.Session() if seed % 2 == 0 else requests
    local = {"valid": 0, "invalid": 0, "lost": 0, "wrong_refusal": 0, "failures": []}
    while time.time() < deadline:
        f = rng.choice(funcs)
        detail = ""
        try:
            # (kind, ok) or (kind, ok, what the server answered)
            kind, ok, *rest = f(session, url, rng)
            detail = rest[0] if rest else ""
        except (requests.RequestException, OSError, ValueError) as e:
            kind, ok = ("valid" if f.__name__.startswith("valid") else "invalid"), False
            local["failures"].append("%s: %s" % (f.__name__, e))
        local[kind] += 1
        progress.add()
        if not ok:
            local["lost" if kind == "valid" else "wrong_refusal"] += 1
            if len(local["failures"]) < 5:
                local["failures"].append(f.__name__ + (" (%s)" % detail if detail else ""))
    with lock:
        for k in ("valid", "invalid", "lost", "wrong_refusal"):
            stats[k] += local[k]
        stats["failures"] += local["failures"][:5]


def test_soak(start_server, model_repo):
    env = {"ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "") +
           ":quarantine_size_mb=16:thread_local_quarantine_size_kb=256"}
    server = start_server(model_repo("identity"), "--http-max-input-size", MAX_INPUT,
                          "--model-control-mode=explicit", "--load-model=*", env=env)
    pid = server.proc.pid
    stats = {"valid": 0, "invalid": 0, "lost": 0, "wrong_refusal": 0, "failures": []}
    reloads = {"reloads": 0, "failures": []}
    abuse = {"rounds": 0, "failures": []}
    lock = threading.Lock()
    progress = Progress()
    t0 = time.time()
    deadline = t0 + SECONDS
    threads = [threading.Thread(target=client,
                                args=(server.url, k, deadline, stats, lock, progress))
               for k in range(CLIENTS)]
    threads.append(threading.Thread(target=reloader,
                                    args=(server.url, deadline, progress, reloads)))
    threads.append(threading.Thread(target=abuser,
                                    args=(server.port, deadline, progress, abuse)))
    for t in threads:
        t.start()
    # RSS: after a warm-up of a quarter of the run (allocator pools, ASan
    # quarantine and thread caches fill up), then at the end.
    time.sleep(SECONDS / 4)
    rss_warm = rss_kb(pid)
    samples = [rss_warm]
    while time.time() < deadline:
        time.sleep(min(1.0, max(0.0, deadline - time.time())))
        if server.alive():
            samples.append(rss_kb(pid))
    for t in threads:
        t.join(timeout=120)
    elapsed = time.time() - t0
    # Everything the abuser left behind is given back: bodies, unread
    # replies (their connections are closed), queued requests.
    held_end = None
    settle = time.time() + 30
    while server.alive() and time.time() < settle:
        held_end = metric(server, "ptserve_request_memory_bytes")
        if held_end == 0:
            break
        time.sleep(0.1)
    alive = server.alive()
    rss_end = rss_kb(pid) if alive else 0
    code = server.stop()
    log = server.log()
    sanitizer = [m for m in ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:")
                 if m in log]
    report = {
        "seconds": round(elapsed, 1),
        "clients": CLIENTS,
        "requests": stats["valid"] + stats["invalid"],
        "valid": stats["valid"],
        "invalid": stats["invalid"],
        "lost_valid": stats["lost"],
        "wrong_refusals": stats["wrong_refusal"],
        "reloads": reloads["reloads"],
        "abuse_rounds": abuse["rounds"],
        "request_bytes_held_at_end": held_end,
        "failed_reloads": len(reloads["failures"]),
        "requests_per_second": round((stats["valid"] + stats["invalid"]) / elapsed, 1),
        "crashes": 0 if alive and code == 0 else 1,
        "exit_code": code,
        "rss_kb_after_warmup": rss_warm,
        "rss_kb_end": rss_end,
        "rss_kb_peak": max(samples),
        "rss_growth_kb": rss_end - rss_warm,
        "sanitizer_reports": sanitizer,
    }
    print("\nsoak:", json.dumps(report))
    if os.environ.get("PTS_SOAK_REPORT"):
        with open(os.environ["PTS_SOAK_REPORT"], "w") as f:
            json.dump(report, f, indent=1)
    assert alive, log[-3000:]
    assert code == 0
    assert not sanitizer, log[-5000:]
    assert stats["lost"] == 0, stats["failures"]
    assert stats["wrong_refusal"] == 0, stats["failures"]
    assert stats["valid"] > 50
    assert reloads["failures"] == [], reloads["failures"][:5]
    assert reloads["reloads"] > 0
    assert abuse["failures"] == [] and abuse["rounds"] > 0, abuse
    assert held_end == 0, report
    assert report["rss_growth_kb"] < RSS_GROWTH_LIMIT_KB, report
