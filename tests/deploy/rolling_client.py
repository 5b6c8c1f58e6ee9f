"""Steady inference traffic, HTTP and gRPC, for test_rolling_restart.py.

    rolling_client.py --http http://HOST:PORT --grpc HOST:PORT --stop-file F --out F.json
                      [--http-threads 2] [--grpc-threads 2] [--max-seconds 100]

Each thread sends requests back to back (HTTP: a keep-alive requests.Session;
gRPC: tritonclient's InferenceServerClient) to the identity model "slow",
each with its own INT64 vector, and checks that the answer echoes it. It
stops when the stop file appears or after --max-seconds, whichever is first,
and writes every request as [start (epoch s), latency (ms), protocol, error]
to --out ("" = correct answer). The load is bounded in count and time and
goes only to the addresses given (the test's own balancer).
"""
import argparse
import json
import os
import threading
import time

import numpy as np
import requests
import tritonclient.grpc as grpcclient

MODEL = "slow"


def http_worker(url, k, stop, records):
    session = requests.Session()
    n = 0
    while not stop():
        values = [k, n, -n]
        n += 1
        t0 = time.time()
        err = ""
        try:
            r = session.post(url + "/v2/models/%s/infer" % MODEL, timeout=10, json={
                "inputs": [{"name": "INPUT0", "datatype": "INT64", "shape": [3],
                            "data": values}]})
            if r.status_code != 200:
                err = "HTTP %d: %s" % (r.status_code, r.text[:200])
            elif r.json()["outputs"][0]["data"] != values:
                err = "wrong answer: %s" % r.text[:200]
        except Exception as e:  # noqa: BLE001 - every failure is a result
            err = "%s: %s" % (type(e).__name__, e)
        records.append([t0, (time.time() - t0) * 1000.0, "http", err])


def grpc_worker(target, k, stop, records):
    client = grpcclient.InferenceServerClient(target)
    n = 0
    while not stop():
        values = np.array([k, n, -n], dtype=np.int64)
        n += 1
        inp = grpcclient.InferInput("INPUT0", [3], "INT64")
        inp.set_data_from_numpy(values)
        t0 = time.time()
        err = ""
        try:
            out = client.infer(MODEL, [inp], client_timeout=10).as_numpy("OUTPUT0")
            if out is None or out.tolist() != values.tolist():
                err = "wrong answer: %s" % (None if out is None else out.tolist())
        except Exception as e:  # noqa: BLE001
            err = "%s: %s" % (type(e).__name__, e)
        records.append([t0, (time.time() - t0) * 1000.0, "grpc", err])
    client.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--http", required=True)
    ap.add_argument("--grpc", required=True)
    ap.add_argument("--stop-file", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--http-threads", type=int, default=2)
    ap.add_argument("--grpc-threads", type=int, default=2)
    ap.add_argument("--max-seconds", type=float, default=100)
    a = ap.parse_args()
    deadline = time.monotonic() + a.max_seconds

    def stop():
        return time.monotonic() > deadline or os.path.exists(a.stop_file)

    per_thread = []
    threads = []
    for k in range(a.http_threads):
        per_thread.append([])
        threads.append(threading.Thread(target=http_worker, args=(a.http, k, stop, per_thread[-1])))
    for k in range(a.grpc_threads):
        per_thread.append([])
        threads.append(threading.Thread(target=grpc_worker,
                                        args=(a.grpc, 1000 + k, stop, per_thread[-1])))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    records = sorted(r for recs in per_thread for r in recs)
    with open(a.out + ".tmp", "w") as f:
        json.dump({"records": records}, f)
    os.rename(a.out + ".tmp", a.out)


if __name__ == "__main__":
    main()
