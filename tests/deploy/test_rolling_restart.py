"""A rolling restart under load behind a real load balancer: no request fails;
then a replica is killed: the balancer's retries lose at most what it held.

Topology, made by the test and removed by it (also on failure):

    netns <tag>lb: HAProxy (deploy/haproxy/haproxy.cfg, Debian's haproxy) on
                   127.0.0.1:8080 (HTTP) and :8081 (gRPC, h2c), and the load
                   client (rolling_client.py), 2 HTTP + 2 gRPC threads
        veth 10.231.i.1/24 <-> 10.231.i.2/24, i = 1..3
    netns <tag>r1..r3: one ptserve replica each, HTTP 8000, gRPC 8001,
                   metrics 8002, --exit-drain-secs 3

Addresses exist only inside these namespaces; traffic never leaves them.
The model is the identity backend with a 10 ms execute delay, so requests
are in flight at every signal; the client checks every answer against its
input. One client runs through both phases:

1. Rolling restart. Each replica in turn gets SIGTERM, must be taken out
   by HAProxy's health check (readiness fails at once, the drain keeps
   serving), exit 0, and is started again; the next one goes only once
   HAProxy sends it traffic again. Then: zero failed requests over HTTP and
   gRPC, and HAProxy's counters show that none needed its retry or
   redispatch safety net (wretr, wredis) and no server error or failed
   connection happened (eresp, econ, 5xx).
2. Crash. One replica gets SIGKILL: no drain, its connections close (or
   are reset) and new ones are refused until the health check takes it
   out. HAProxy's retries (`retry-on conn-failure empty-response`,
   `option redispatch 1`) resend what they can to the other replicas.
   Bound: a client thread has one request outstanding, so at most
   KILL_BOUND = one per client thread (4) were on the killed replica when
   it died; at most that many requests may fail, each of them started
   before the replica was dead, and every request sent after that must
   succeed. The survivors then carry on.

With PTS_ROLLING_REPORT=<file.md> the figures (requests, failures, p50/p99
overall and during the restarts; the crash's failures, bound and HAProxy's
retry counters) are written there; tests/deploy/results/rolling-restart.md is the committed one.
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest

from deployutil import ROOT, needs_root, wait_for

HAPROXY_CFG = os.path.join(ROOT, "deploy", "haproxy", "haproxy.cfg")
CLIENT = os.path.join(ROOT, "tests", "deploy", "rolling_client.py")
REPLICAS = 3
DRAIN_SECS = 3
HTTP_THREADS = 2
GRPC_THREADS = 2
# Requests that may fail when a replica is SIGKILLed: each client thread waits
# for its answer before sending again, so at most one request per thread is
# in flight on the killed replica; anything sent later is HAProxy's to retry.
KILL_BOUND = HTTP_THREADS + GRPC_THREADS
KILLED = 2  # the replica that gets SIGKILL (1-based)
# HAProxy's per-server counters that its retry safety net moves.
RETRY_COUNTERS = ("wretr", "wredis", "eresp", "econ")

CONFIG = """
name: "slow"
backend: "identity"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_INT64 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT64 dims: [ -1 ] } ]
instance_group [ { count: 4 kind: KIND_CPU } ]
parameters { key: "execute_delay_ms" value: { string_value: "10" } }
"""


def sh(*argv):
    subprocess.run(argv, check=True, capture_output=True, timeout=30)


class Namespaces:
    """The balancer's namespace and one per replica, joined by veth pairs."""

    def __init__(self, tag):
        self.lb = tag + "lb"
        self.replicas = ["%sr%d" % (tag, i) for i in range(1, REPLICAS + 1)]
        self.tag = tag
        self.made = []

    def addr(self, i):  # replica i (1-based), as the balancer reaches it
        return "10.231.%d.2" % i

    def create(self):
        for ns in [self.lb] + self.replicas:
            sh("ip", "netns", "add", ns)
            self.made.append(ns)
            sh("ip", "-n", ns, "link", "set", "lo", "up")
        for i, ns in enumerate(self.replicas, 1):
            a, b = "%sa%d" % (self.tag, i), "%sb%d" % (self.tag, i)
            sh("ip", "link", "add", a, "type", "veth", "peer", "name", b)
            # Moved at once: no address is ever set outside the namespaces.
            sh("ip", "link", "set", a, "netns", self.lb)
            sh("ip", "link", "set", b, "netns", ns)
            sh("ip", "-n", self.lb, "addr", "add", "10.231.%d.1/24" % i, "dev", a)
            sh("ip", "-n", ns, "addr", "add", "%s/24" % self.addr(i), "dev", b)
            sh("ip", "-n", self.lb, "link", "set", a, "up")
            sh("ip", "-n", ns, "link", "set", b, "up")

    def delete(self):
        # Deleting a namespace deletes its end of each veth, and so the pair.
        for ns in reversed(self.made):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)
        for i in range(1, REPLICAS + 1):  # a pair never moved (failure mid-create)
            subprocess.run(["ip", "link", "del", "%sa%d" % (self.tag, i)], capture_output=True,
                           timeout=30)


class Stats:
    """HAProxy's admin socket: `show stat` as {(proxy, server): row}."""

    def __init__(self, path):
        self.path = path

    def read(self):
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(5)
            s.connect(self.path)
            s.sendall(b"show stat\n")
            data = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
        lines = data.decode().splitlines()
        head = lines[0].lstrip("# ").split(",")
        rows = {}
        for line in lines[1:]:
            if line:
                row = dict(zip(head, line.split(",")))
                rows[(row["pxname"], row["svname"])] = row
        return rows

    def servers(self, name):
        rows = self.read()
        return [rows[(b, name)] for b in ("ptserve_http", "ptserve_grpc")]

    def all_up(self, name):
        try:
            return all(r["status"] == "UP" for r in self.servers(name))
        except OSError:
            return False

    def all_down(self, name):
        return all(r["status"].startswith("DOWN") for r in self.servers(name))

    def sent(self, name):
        return [int(r["stot"]) for r in self.servers(name)]


def percentile(values, p):
    if not values:
        return float("nan")
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100.0 * (len(v) - 1))))]


@pytest.fixture
def cluster(ptserve_bin, tmp_path):
    """Namespaces, three replicas and HAProxy; everything removed afterwards."""
    needs_root()
    for tool in ("ip", "haproxy"):
        assert shutil.which(tool), "%s missing: scripts/setup.sh installs iproute2 and haproxy" % tool
    net = Namespaces("pts%d" % (os.getpid() % 100000))
    repo = tmp_path / "repo"
    (repo / "slow" / "1").mkdir(parents=True)
    (repo / "slow" / "config.pbtxt").write_text(CONFIG)
    procs = {}

    def start_replica(i, generation):
        log = open(tmp_path / ("r%d-%d.log" % (i, generation)), "w")
        p = subprocess.Popen(
            ["ip", "netns", "exec", net.replicas[i - 1], ptserve_bin,
             "--model-repository", str(repo), "--http-port", "8000", "--grpc-port", "8001",
             "--metrics-port", "8002", "--exit-drain-secs", str(DRAIN_SECS),
             "--exit-timeout-secs", "30"],
            stdout=log, stderr=subprocess.STDOUT)
        p.log_path = log.name
        procs["r%d" % i] = p
        return p

    sock = str(tmp_path / "haproxy.sock")
    env = dict(os.environ, PTSERVE_LB_ADDR="127.0.0.1", PTSERVE_LB_SOCKET=sock,
               **{"PTSERVE_R%d" % i: net.addr(i) for i in range(1, REPLICAS + 1)})
    c = type("Cluster", (), {})()
    c.net, c.procs, c.start_replica, c.tmp = net, procs, start_replica, tmp_path
    c.stats = Stats(sock)
    try:
        net.create()
        for i in range(1, REPLICAS + 1):
            start_replica(i, 0)
        hlog = open(tmp_path / "haproxy.log", "w")
        procs["haproxy"] = subprocess.Popen(
            ["ip", "netns", "exec", net.lb, "haproxy", "-db", "-f", HAPROXY_CFG],
            stdout=hlog, stderr=subprocess.STDOUT, env=env)
        c.haproxy_log = hlog.name
        for i in range(1, REPLICAS + 1):
            wait_for(lambda: c.stats.all_up("r%d" % i), 60, "replica %d up in HAProxy" % i,
                     lambda: open(c.haproxy_log).read() + open(procs["r%d" % i].log_path).read())
        yield c
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()
        net.delete()


def counters(stats):
    """{(backend, server, counter): value} of RETRY_COUNTERS on the replicas."""
    return {(px, sv, k): int(row[k] or 0)
            for (px, sv), row in stats.items()
            if px.startswith("ptserve_") and sv.startswith("r") for k in RETRY_COUNTERS}


def frontend_5xx(stats):
    return sum(int(stats[(px, "FRONTEND")]["hrsp_5xx"] or 0) for px in ("http_in", "grpc_in"))


def test_rolling_restart_then_sigkill(cluster):
    c = cluster
    stop_file = c.tmp / "stop"
    out = c.tmp / "client.json"
    clog = open(c.tmp / "client.log", "w")
    client = subprocess.Popen(
        ["ip", "netns", "exec", c.net.lb, sys.executable, CLIENT,
         "--http", "http://127.0.0.1:8080", "--grpc", "127.0.0.1:8081",
         "--http-threads", str(HTTP_THREADS), "--grpc-threads", str(GRPC_THREADS),
         "--stop-file", str(stop_file), "--out", str(out), "--max-seconds", "100"],
        stdout=clog, stderr=subprocess.STDOUT)
    c.procs["client"] = client

    def more_traffic(names, what):
        base = {n: c.stats.sent(n) for n in names}
        wait_for(lambda: all(s >= b + 10 for n in names
                             for s, b in zip(c.stats.sent(n), base[n])), 60, what,
                 lambda: open(clog.name).read())

    windows = []
    try:
        # Every replica takes traffic over both protocols before the first restart.
        more_traffic(["r%d" % i for i in range(1, REPLICAS + 1)], "traffic reaching every replica")

        # Phase 1: the rolling restart.
        for i in range(1, REPLICAS + 1):
            name = "r%d" % i
            old = c.procs[name]
            t_term = time.time()
            old.send_signal(signal.SIGTERM)
            # The health check takes it out while it still serves (the drain) ...
            wait_for(lambda: c.stats.all_down(name), 30, "HAProxy marking %s down" % name)
            assert old.poll() is None, "replica %s exited before the balancer took it out" % name
            # ... then it finishes what it accepted and exits cleanly.
            assert old.wait(timeout=60) == 0, open(old.log_path).read()
            log = open(old.log_path).read()
            assert "Draining: not ready, still serving inference for %d s" % DRAIN_SECS in log
            assert "Exit timeout expired" not in log
            new = c.start_replica(i, 1)
            wait_for(lambda: c.stats.all_up(name), 60, "%s back up" % name,
                     lambda: open(new.log_path).read())
            windows.append((t_term, time.time()))
            more_traffic([name], "traffic reaching the restarted %s" % name)
        rolled = c.stats.read()

        # Phase 2: a crash. SIGKILL goes to ptserve itself (`ip netns exec` execs it).
        victim = "r%d" % KILLED
        t_kill = time.time()
        c.procs[victim].send_signal(signal.SIGKILL)
        assert c.procs[victim].wait(timeout=30) == -signal.SIGKILL
        t_dead = time.time()
        wait_for(lambda: c.stats.all_down(victim), 30, "HAProxy marking the killed %s down" % victim)
        t_down = time.time()
        more_traffic([n for n in ("r%d" % i for i in range(1, REPLICAS + 1)) if n != victim],
                     "traffic reaching the survivors")
    finally:
        stop_file.write_text("")
        client.wait(timeout=60)
    assert client.returncode == 0, open(clog.name).read()
    records = json.load(open(out))["records"]
    final = c.stats.read()

    # Phase 1: nothing needed the safety net.
    for key, value in counters(rolled).items():
        assert value == 0, ("during the rolling restart", key, value)
    assert frontend_5xx(rolled) == 0, "5xx during the rolling restart"

    # A request belongs to the crash when it had not ended before the SIGKILL.
    rolling = [r for r in records if r[0] + r[1] / 1000.0 < t_kill]
    crash = [r for r in records if r[0] + r[1] / 1000.0 >= t_kill]
    before, after = counters(rolled), counters(final)
    kill = {"t_kill": t_kill, "t_dead": t_dead, "t_down": t_down,
            "delta": {k: sum(after[key] - before[key] for key in after if key[2] == k)
                      for k in RETRY_COUNTERS},
            "victim_econ": sum(after[key] - before[key] for key in after
                               if key[1] == victim and key[2] == "econ"),
            "5xx": frontend_5xx(final) - frontend_5xx(rolled)}
    report = summarize(rolling, windows, crash, kill)
    print(report)
    if os.environ.get("PTS_ROLLING_REPORT"):
        with open(os.environ["PTS_ROLLING_REPORT"], "w") as f:
            f.write(report)

    assert not [r for r in rolling if r[3]], [r for r in rolling if r[3]][:10]
    for proto in ("http", "grpc"):
        assert sum(1 for r in rolling if r[2] == proto) >= 100, proto
    failed = [r for r in crash if r[3]]
    assert len(failed) <= KILL_BOUND, (len(failed), KILL_BOUND, failed)
    # Whatever was sent once the replica was dead went to HAProxy's retries.
    assert all(r[0] <= t_dead for r in failed), (t_dead, failed)
    for proto in ("http", "grpc"):
        assert sum(1 for r in crash if r[2] == proto and not r[3]) >= 10, proto


def summarize(rolling, windows, crash, kill):
    def in_windows(t):
        return any(a <= t <= b for a, b in windows)

    def p(sel, q):
        return percentile([r[1] for r in sel], q)

    rows = []
    for proto in ("http", "grpc", "all"):
        sel = [r for r in rolling if proto == "all" or r[2] == proto]
        during = [r for r in sel if in_windows(r[0])]
        rows.append("| %s | %d | %d | %d | %.1f | %.1f | %.1f |" % (
            proto, len(sel), sum(1 for r in sel if r[3]), len(during),
            p(sel, 50), p(sel, 99), p(during, 99)))
    crash_rows = []
    for proto in ("http", "grpc", "all"):
        sel = [r for r in crash if proto == "all" or r[2] == proto]
        # In flight at the kill, or sent before HAProxy took the replica out.
        exposed = [r for r in sel if r[0] <= kill["t_down"]]
        crash_rows.append("| %s | %d | %d | %d | %d | %.1f |" % (
            proto, len(sel), sum(1 for r in sel if r[3]), len(exposed),
            sum(1 for r in exposed if r[3]), p(exposed, 99)))
    errors = sorted(set(r[3] for r in crash if r[3]))
    span = rolling[-1][0] - rolling[0][0] if rolling else 0
    restarts = ", ".join("%.1f s" % (b - a) for a, b in windows)
    d = kill["delta"]
    return "\n".join([
        "# Rolling restart and a crash behind HAProxy",
        "",
        "tests/deploy/test_rolling_restart.py: %d ptserve replicas (identity model, 10 ms per "
        "request), each in its own network namespace, behind HAProxy (Debian %s, "
        "deploy/haproxy/haproxy.cfg) with health checks on /v2/health/ready every 250 ms; "
        "%d HTTP + %d gRPC client threads sending back to back. Latencies are the client's, "
        "through HAProxy, on a %d-core machine that also runs the replicas and the balancer." % (
            REPLICAS, haproxy_version(), HTTP_THREADS, GRPC_THREADS, os.cpu_count() or 0),
        "",
        "## Rolling restart",
        "",
        "For %.0f s each replica in turn gets SIGTERM (--exit-drain-secs %d), exits, and is "
        "started again. Restart windows (SIGTERM to back up in HAProxy): %s." % (
            span, DRAIN_SECS, restarts),
        "",
        "| protocol | requests | failed | during restarts | p50 ms | p99 ms | p99 ms during restarts |",
        "|---|---|---|---|---|---|---|",
    ] + rows + [
        "",
        "HAProxy retries (wretr), redispatches (wredis), server errors (eresp), failed "
        "connections (econ) and 5xx answers: all 0.",
        "",
        "## SIGKILL",
        "",
        "Then replica r%d gets SIGKILL under the same load: dead %.0f ms after the signal, "
        "marked down by HAProxy %.0f ms after it; the test goes on until both survivors have "
        "answered 10 more requests per protocol. Bound the test asserts: at most %d failed "
        "requests (one per client thread: each has one request outstanding), all of them "
        "started before the replica was dead." % (
            KILLED, (kill["t_dead"] - kill["t_kill"]) * 1000,
            (kill["t_down"] - kill["t_kill"]) * 1000, KILL_BOUND),
        "",
        "| protocol | requests | failed | until marked down | failed until marked down "
        "| p99 ms until marked down |",
        "|---|---|---|---|---|---|",
    ] + crash_rows + [
        "",
        "HAProxy's counters over the crash: retries (wretr) %d, redispatches (wredis) %d, "
        "failed connections (econ) %d (%d to the killed replica), server errors (eresp) %d, "
        "5xx answers to the client %d.%s" % (
            d["wretr"], d["wredis"], d["econ"], kill["victim_econ"], d["eresp"], kill["5xx"],
            (" Errors seen: " + "; ".join(e[:120] for e in errors) + ".") if errors else ""),
        "",
        "Regenerate (as root): `PTS_ROLLING_REPORT=tests/deploy/results/rolling-restart.md make deploy-test "
        "PYTEST_ARGS=\"-k rolling\"`.",
        ""])


def haproxy_version():
    out = subprocess.run(["haproxy", "-v"], capture_output=True, text=True).stdout
    return out.split()[2] if len(out.split()) > 2 else "?"
