#!/usr/bin/env python3
"""What an ensemble step costs: an ensemble of two identity models against
the same two models called one after the other by the client, and against
one call, all in the same run on the same server.

    .venv/bin/python bench/ensemble/run.py [--bin PTSERVE] [--seconds 5]

(run it with the project venv, whose tritonclient it needs)

Writes a repository of identity-backend models (no torch: the model time is
zero, so the table shows the serving overhead alone) to a temporary
directory, starts ptserve (built in build-bench/ unless --bin names one)
on free ports, and measures each case with
tritonclient over gRPC, first one request at a time, then 8 client threads.
Prints a markdown table and writes it to bench/ensemble/results/results.md.
"""
import argparse
import os
import sys
import tempfile
import threading
import time

import numpy as np
import tritonclient.grpc as grpcclient

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import harness as h  # noqa: E402

IDENTITY = """name: "{name}"
backend: "identity"
max_batch_size: 8
input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 256 ] }} ]
output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 256 ] }} ]
"""

ENSEMBLE = """name: "two"
platform: "ensemble"
max_batch_size: 8
input [ { name: "IN" data_type: TYPE_FP32 dims: [ 256 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 256 ] } ]
ensemble_scheduling { step [
  { model_name: "id_a" input_map { key: "INPUT0" value: "IN" }
    output_map { key: "OUTPUT0" value: "mid" } },
  { model_name: "id_b" input_map { key: "INPUT0" value: "mid" }
    output_map { key: "OUTPUT0" value: "OUT" } } ] }
"""


def write_repo(d):
    for name, text in (("id_a", IDENTITY.format(name="id_a")),
                       ("id_b", IDENTITY.format(name="id_b")), ("two", ENSEMBLE)):
        os.makedirs(os.path.join(d, name, "1"))
        with open(os.path.join(d, name, "config.pbtxt"), "w") as f:
            f.write(text)


def one_input(name, x):
    i = grpcclient.InferInput(name, list(x.shape), "FP32")
    i.set_data_from_numpy(x)
    return i


def case_calls(client, case, x):
    if case == "one call (id_a)":
        client.infer("id_a", [one_input("INPUT0", x)])
    elif case == "two calls (id_a, then id_b)":
        mid = client.infer("id_a", [one_input("INPUT0", x)]).as_numpy("OUTPUT0")
        client.infer("id_b", [one_input("INPUT0", mid)])
    else:
        client.infer("two", [one_input("IN", x)])


def measure(url, case, threads, seconds):
    x = np.arange(256, dtype=np.float32).reshape(1, 256)
    lat, lock = [], threading.Lock()
    stop = time.monotonic() + seconds

    def worker():
        c = grpcclient.InferenceServerClient(url)
        case_calls(c, case, x)  # warm the connection
        mine = []
        while time.monotonic() < stop:
            t0 = time.perf_counter()
            case_calls(c, case, x)
            mine.append(time.perf_counter() - t0)
        with lock:
            lat.extend(mine)

    ts = [threading.Thread(target=worker) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    a = np.array(lat) * 1e6
    return len(a) / seconds, np.percentile(a, 50), np.percentile(a, 99)


CASES = ("one call (id_a)", "two calls (id_a, then id_b)", "ensemble of id_a, id_b (two)")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bin", help="a ptserve to measure (default: built in build-bench/)")
    p.add_argument("--seconds", type=float, default=5.0)
    args = p.parse_args()
    binary = args.bin or os.path.join(h.build(os.path.join(h.ROOT, "build-bench"),
                                              ["ptserve"]), "ptserve")
    rows = []
    with tempfile.TemporaryDirectory() as d:
        write_repo(d)
        meta = h.meta(os.path.join(d, "meta.txt"))
        with h.Server(binary, ["--model-repository", d], os.path.join(d, "server.log"),
                      grpc=True) as s:
            for threads, case in ((t, c) for t in (1, 8) for c in CASES):
                h.log("%d clients, %s" % (threads, case))
                rows.append((threads, case, *measure("127.0.0.1:%d" % s.grpc_port, case,
                                                     threads, args.seconds)))
    table = "\n".join(h.table([("clients", lambda r: str(r[0])), ("case", lambda r: r[1]),
                               ("requests/s", lambda r: "%.0f" % r[2]),
                               ("p50 µs", lambda r: "%.0f" % r[3]),
                               ("p99 µs", lambda r: "%.0f" % r[4])], rows, left=(1,)))
    print(table)
    out = os.path.join(HERE, "results")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write("# bench/ensemble\n\n`%s`, %s, ptserve `%s`, %d CPUs (%s), load average "
                "before %s, after %s (a shared host: compare the rows of one run), %.0f s "
                "per case, gRPC, tritonclient %s. Identity models (no model time): the "
                "serving overhead alone. A client request is one row of 256 FP32.\n\n%s\n"
                % (" ".join(["bench/ensemble/run.py"] + sys.argv[1:]), meta["date"],
                   meta["commit"], os.cpu_count(), meta["cpu_model"], meta["load_before"],
                   h.loadavg(), args.seconds, getattr(grpcclient, "__version__", "2.73.0"),
                   table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
