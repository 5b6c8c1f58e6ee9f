"""bench/overload/attack.py — the overload issue's three attacks, each
against one server build (bench/overload/run.py runs them against the
build before the overload work and the current tree):

  attack_fds     the server under `prlimit --nofile=512`, idle connections
                 to its HTTP or gRPC port: CPU seconds per wall second over
                 a 3 s window once its descriptors ran out, lines written to
                 its log during the attack, how soon it answers again once
                 the clients are gone;
  attack_memory  connections each send `sent` bytes of a declared
                 `declared`-byte body and stall: resident size while they
                 hold, answers they got;
  attack_rounds  rounds of that, each closed in the middle: resident size
                 after each round, and sampled every 100 ms.
"""
import os
import select
import socket
import threading
import time

import harness as h

REPO = os.path.join(h.ROOT, "tests", "e2e", "repos", "identity")
MB = 1 << 20


def start(binary, work, name, args=(), nofile=None, env=None):
    """The identity repository served on 127.0.0.1 (HTTP, gRPC, metrics)."""
    prefix = ("prlimit", "--nofile=%d:%d" % (nofile, nofile), "--") if nofile else ()
    return h.Server(binary, ["--model-repository", REPO, "--http-address", "127.0.0.1",
                             "--grpc-address", "127.0.0.1", *args],
                    os.path.join(work, name + ".log"), grpc=True, metrics=True, prefix=prefix,
                    env=env)


def log_lines(s):
    with open(s.log_path, errors="replace") as f:
        return sum(1 for _ in f)


def grpc_answers(s):
    import tritonclient.grpc as grpcclient
    try:
        return grpcclient.InferenceServerClient(
            "127.0.0.1:%d" % s.grpc_port).is_server_live(client_timeout=2)
    except Exception:  # noqa: BLE001
        return False


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


def open_fds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def attack_fds(binary, work, name, args, target, conns):
    """The connections are opened at once; those beyond the listen backlog
    come in as the kernel retries them (1 s, 3 s, 7 s), so the window
    starts once the server holds 500 descriptors (or after 10 s, as for a
    build that refuses connections beyond its limit) and lasts 4 s: CPU
    over its last 3, log lines from the first connection to its end."""
    s = start(binary, work, name, args, nofile=512)
    try:
        lines0 = log_lines(s)
        socks = idle(s.port if target == "http" else s.grpc_port, conns)
        t = time.monotonic()
        while open_fds(s.pid) < 500 and time.monotonic() - t < 10:
            time.sleep(0.1)
        time.sleep(1.0)
        c0, t0 = h.cpu_seconds(s.pid), time.monotonic()
        time.sleep(3.0)
        rate = (h.cpu_seconds(s.pid) - c0) / (time.monotonic() - t0)
        lines = log_lines(s) - lines0
        for sock in socks:
            sock.close()
        check = s.answers if target == "http" else (lambda: grpc_answers(s))
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
    s = start(binary, work, name, args)
    try:
        base = h.rss_mb(s.pid)
        socks, answers = burst(s, conns, declared, sent)
        time.sleep(1.0)
        held = h.rss_mb(s.pid)
        refused = sum(1 for a in answers if a and a != "closed")
        for sock in socks:
            sock.close()
        return {"rss_start_mb": round(base), "rss_held_mb": round(held),
                "refused": refused, "admitted": conns - refused,
                "answer": next((a for a in answers if a), "")}
    finally:
        s.stop()


def attack_rounds(binary, work, name, args, conns, declared, sent, rounds, env=None):
    s = start(binary, work, name, args, env=env)
    samples = []  # (seconds, rss MB)
    t0 = time.monotonic()
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            samples.append((round(time.monotonic() - t0, 2), round(h.rss_mb(s.pid), 1)))
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
            after.append(round(h.rss_mb(s.pid)))
        return {"rss_after_rounds_mb": after, "samples": samples}
    finally:
        stop.set()
        sampler.join()
        s.stop()
