"""bench/overload/attack.py — the overload issue's attacks against two builds.

    attack.py --before BIN --after BIN --out DIR [--scale 1.0]

For each build, the same three attacks as the issue, at its sizes (scale
1.0; smaller scales divide connection counts and sizes):

  fds     the server under `prlimit --nofile=512`, 584 idle connections to
          the HTTP port (default flags, then the limits lifted so the
          descriptors run out), and the same against the gRPC port: CPU
          seconds per wall second over a 3 s window, lines written to the
          log during the attack, whether it answers again once the clients
          are gone;
  memory  60 connections each send 50 MB of a declared 60 MB body and
          stall: resident size while they hold, answers they got (the
          after build also with --request-memory-budget 1 GiB);
  rounds  five rounds of that, each closed in the middle: resident size
          after each round.

Writes DIR/results.md (tables), DIR/results.json and DIR/rss.png (resident
size over the rounds). Numbers from a shared 2-core machine: compare the
builds, not the absolute values.
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import threading
import time

import requests

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REPO = os.path.join(ROOT, "tests", "e2e", "repos", "identity")
MB = 1 << 20


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, binary, log_path, args=(), nofile=None, env=None):
        self.port, self.grpc_port, self.metrics_port = free_port(), free_port(), free_port()
        cmd = [binary, "--model-repository", REPO, "--http-port", str(self.port),
               "--http-address", "127.0.0.1", "--grpc-port", str(self.grpc_port),
               "--grpc-address", "127.0.0.1", "--metrics-port", str(self.metrics_port)]
        cmd += [str(a) for a in args]
        if nofile:
            cmd = ["prlimit", "--nofile=%d:%d" % (nofile, nofile), "--"] + cmd
        self.log_path = log_path
        with open(log_path, "w") as logf:
            self.proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT,
                                         env=dict(os.environ, **(env or {})))
        self.url = "http://127.0.0.1:%d" % self.port
        deadline = time.time() + 60
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("server exited: " + open(log_path).read()[-2000:])
            if self.answers(1):
                return
            time.sleep(0.05)
        raise RuntimeError("server did not start")

    def answers(self, timeout=2):
        try:
            return requests.get(self.url + "/v2/health/ready", timeout=timeout).status_code == 200
        except requests.RequestException:
            return False

    def grpc_answers(self):
        import tritonclient.grpc as grpcclient
        try:
            return grpcclient.InferenceServerClient(
                "127.0.0.1:%d" % self.grpc_port).is_server_live(client_timeout=2)
        except Exception:  # noqa: BLE001
            return False

    def cpu(self):
        f = open("/proc/%d/stat" % self.proc.pid).read().rsplit(")", 1)[1].split()
        return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")

    def rss_mb(self):
        for line in open("/proc/%d/status" % self.proc.pid):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0

    def log_lines(self):
        with open(self.log_path, errors="replace") as f:
            return sum(1 for _ in f)

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def idle(port, n):
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.setblocking(False)
        try:
            s.connect(("127.0.0.1", port))
        except BlockingIOError:
            pass
        socks.append(s)
    return socks


def attack_fds(binary, work, name, args, target, conns):
    s = Server(binary, os.path.join(work, name + ".log"), args, nofile=512)
    try:
        lines0 = s.log_lines()
        socks = idle(s.port if target == "http" else s.grpc_port, conns)
        time.sleep(1.0)
        c0, t0 = s.cpu(), time.monotonic()
        time.sleep(3.0)
        rate = (s.cpu() - c0) / (time.monotonic() - t0)
        lines = s.log_lines() - lines0
        for sock in socks:
            sock.close()
        check = s.answers if target == "http" else s.grpc_answers
        t1 = time.monotonic()
        recovered = None
        while time.monotonic() - t1 < 20:
            if check():
                recovered = time.monotonic() - t1
                break
            time.sleep(0.1)
        return {"cpu_per_s": round(rate, 3), "log_lines_attack": lines,
                "recovered_s": None if recovered is None else round(recovered, 2)}
    finally:
        s.stop()


def post_partial(port, declared, sent, answers, i):
    """Sends a head declaring `declared` bytes and `sent` of them, then
    waits (answers[i] gets the status line if the server answers)."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(b"POST /v2/models/dt_fp32/infer HTTP/1.1\r\nHost: x\r\n"
                 b"Content-Length: %d\r\n\r\n" % declared)
    part = b"\0" * MB
    sock.setblocking(False)
    left = sent
    import select
    while left > 0:
        r, w, _ = select.select([sock], [sock], [], 10)
        if r:
            data = sock.recv(4096)
            answers[i] = data.split(b"\r\n", 1)[0].decode(errors="replace") if data else "closed"
            break
        if w:
            try:
                left -= sock.send(part[:min(MB, left)])
            except (BlockingIOError, InterruptedError):
                pass
            except OSError:
                answers[i] = "reset"
                break
    return sock


def burst(s, conns, declared, sent):
    answers = [None] * conns
    socks = [None] * conns

    def one(i):
        socks[i] = post_partial(s.port, declared, sent, answers, i)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(conns)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return socks, answers


def attack_memory(binary, work, name, args, conns, declared, sent):
    s = Server(binary, os.path.join(work, name + ".log"), args)
    try:
        base = s.rss_mb()
        socks, answers = burst(s, conns, declared, sent)
        time.sleep(1.0)
        held = s.rss_mb()
        refused = sum(1 for a in answers if a and a != "closed")
        for sock in socks:
            sock.close()
        return {"rss_start_mb": round(base), "rss_held_mb": round(held),
                "refused": refused, "admitted": conns - refused,
                "answer": next((a for a in answers if a), "")}
    finally:
        s.stop()


def attack_rounds(binary, work, name, args, conns, declared, sent, rounds, env=None):
    s = Server(binary, os.path.join(work, name + ".log"), args, env=env)
    samples = []  # (seconds, rss MB)
    t0 = time.monotonic()
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            samples.append((round(time.monotonic() - t0, 2), round(s.rss_mb(), 1)))
            time.sleep(0.1)

    sampler = threading.Thread(target=sample)
    sampler.start()
    after = []
    try:
        for _ in range(rounds):
            socks, _ = burst(s, conns, declared, sent)
            time.sleep(0.5)
            for sock in socks:
                sock.close()
            time.sleep(2.5)  # the server's housekeeping runs once a second
            after.append(round(s.rss_mb()))
        return {"rss_after_rounds_mb": after, "samples": samples}
    finally:
        stop.set()
        sampler.join()
        s.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--scale", type=float, default=1.0)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    work = os.path.join(a.out, "logs")
    os.makedirs(work, exist_ok=True)
    conns = max(2, int(60 * a.scale))
    declared, sent = int(60 * MB * a.scale), int(50 * MB * a.scale)
    lifted = ["--http-max-connections", 100000, "--grpc-max-connections", 100000]
    res = {"scale": a.scale}
    print("== descriptors", file=sys.stderr)
    res["fds"] = {
        "before, HTTP": attack_fds(a.before, work, "fds-before-http", [], "http", 584),
        "after, HTTP": attack_fds(a.after, work, "fds-after-http", [], "http", 584),
        "after, HTTP, limits lifted": attack_fds(a.after, work, "fds-after-http-lifted",
                                                 lifted, "http", 584),
        "before, gRPC": attack_fds(a.before, work, "fds-before-grpc", [], "grpc", 584),
        "after, gRPC, limits lifted": attack_fds(a.after, work, "fds-after-grpc-lifted",
                                                 lifted, "grpc", 584),
    }
    print("== memory", file=sys.stderr)
    budget = ["--request-memory-budget", 1 << 30]
    res["memory"] = {
        "before": attack_memory(a.before, work, "mem-before", [], conns, declared, sent),
        "after, default budget": attack_memory(a.after, work, "mem-after", [], conns,
                                               declared, sent),
        "after, 1 GiB budget": attack_memory(a.after, work, "mem-after-1g", budget, conns,
                                             declared, sent),
    }
    print("== rounds", file=sys.stderr)
    res["rounds"] = {
        "before": attack_rounds(a.before, work, "rounds-before", [], conns, declared, sent, 5),
        "after": attack_rounds(a.after, work, "rounds-after", [], conns, declared, sent, 5),
    }
    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump(res, f, indent=1)
    write_md(res, os.path.join(a.out, "results.md"), conns, declared, sent)
    plot(res, os.path.join(a.out, "rss.png"))


def write_md(res, path, conns, declared, sent):
    out = ["# Overload attacks, before and after\n",
           "Produced by `bench/overload/run.sh` (`bench/overload/attack.py`). "
           "Scale %g: %d connections, %d of %d MB each.\n" % (
               res["scale"], conns, sent // MB, declared // MB),
           "## Descriptors exhausted (prlimit --nofile=512, 584 idle connections)\n",
           "| build | CPU s per s | log lines in 4 s | answers again after the clients go |",
           "|---|---:|---:|---|"]
    for k, v in res["fds"].items():
        rec = "no (20 s)" if v["recovered_s"] is None else "yes, %.1f s" % v["recovered_s"]
        out.append("| %s | %.3f | %d | %s |" % (k, v["cpu_per_s"], v["log_lines_attack"], rec))
    out += ["", "## Bodies held (%d connections stall after %d of %d MB)\n" % (
        conns, sent // MB, declared // MB),
        "| build | RSS before (MB) | RSS while held (MB) | admitted | refused | first answer |",
        "|---|---:|---:|---:|---:|---|"]
    for k, v in res["memory"].items():
        out.append("| %s | %d | %d | %d | %d | %s |" % (k, v["rss_start_mb"], v["rss_held_mb"],
                                                       v["admitted"], v["refused"],
                                                       v["answer"] or "—"))
    out += ["", "## Five rounds, each closed in the middle: RSS after each round (MB)\n",
            "| build | 1 | 2 | 3 | 4 | 5 |", "|---|---:|---:|---:|---:|---:|"]
    for k, v in res["rounds"].items():
        out.append("| %s | %s |" % (k, " | ".join(str(x) for x in v["rss_after_rounds_mb"])))
    out.append("\n![resident size over the rounds](rss.png)\n")
    with open(path, "w") as f:
        f.write("\n".join(out))


def plot(res, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 4))
    for k, v in res["rounds"].items():
        xs = [t for t, _ in v["samples"]]
        ys = [m for _, m in v["samples"]]
        ax.plot(xs, ys, label=k)
    ax.set_xlabel("seconds")
    ax.set_ylabel("resident size (MB)")
    ax.set_title("Five rounds of stalled 50 MB bodies, each closed in the middle")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


if __name__ == "__main__":
    main()
