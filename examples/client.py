"""A minimal KServe v2 HTTP client for the example models (`make run`).

    .venv/bin/python examples/client.py [--url http://localhost:8000]

Sends add_sub one JSON request and one binary request (the binary tensor
data extension: a JSON header, then raw little-endian tensor bytes), checks
the answers against numpy, then asks text_upper, mlp_classifier and its
AOTInductor twin mlp_classifier_aoti (which must agree with it), runs a
three-request sequence on accumulator (sequence batching with implicit state),
and asks the ensemble classify_standardized (which must agree with its two
steps asked one after the other).
Needs only requests and numpy.
"""
import argparse
import json
import sys

import numpy as np
import requests


def infer_json(url, model, inputs):
    """inputs: list of (name, datatype, numpy array or list of str)."""
    body = {"inputs": [{"name": name, "datatype": datatype, "shape": list(np.shape(data)),
                        "data": np.asarray(data).ravel().tolist()}
                       for name, datatype, data in inputs]}
    r = requests.post("%s/v2/models/%s/infer" % (url, model), json=body, timeout=60)
    r.raise_for_status()
    return {o["name"]: o for o in r.json()["outputs"]}


def infer_binary(url, model, inputs, outputs):
    """Fixed-size numeric inputs as raw bytes; outputs asked for as raw bytes too."""
    header = {"inputs": [], "outputs": [{"name": o, "parameters": {"binary_data": True}}
                                        for o in outputs]}
    body = b""
    for name, datatype, array in inputs:
        raw = np.ascontiguousarray(array).tobytes()
        header["inputs"].append({"name": name, "datatype": datatype, "shape": list(array.shape),
                                 "parameters": {"binary_data_size": len(raw)}})
        body += raw
    head = json.dumps(header).encode()
    r = requests.post("%s/v2/models/%s/infer" % (url, model), data=head + body, timeout=60,
                      headers={"Inference-Header-Content-Length": str(len(head)),
                               "Content-Type": "application/octet-stream"})
    r.raise_for_status()
    json_len = int(r.headers["Inference-Header-Content-Length"])
    result, offset = {}, json_len
    for o in json.loads(r.content[:json_len])["outputs"]:
        size = o["parameters"]["binary_data_size"]
        dtype = {"FP32": np.float32, "INT64": np.int64}[o["datatype"]]
        result[o["name"]] = np.frombuffer(r.content[offset:offset + size], dtype).reshape(o["shape"])
        offset += size
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://localhost:8000")
    url = parser.parse_args().url.rstrip("/")
    rng = np.random.default_rng(0)

    # add_sub over JSON: a batch of one 3x224x224 image pair.
    a = rng.random((1, 3, 224, 224), dtype=np.float32)
    b = rng.random((1, 3, 224, 224), dtype=np.float32)
    outs = infer_json(url, "add_sub", [("INPUT0", "FP32", a), ("INPUT1", "FP32", b)])
    total = np.array(outs["OUTPUT0"]["data"], np.float32).reshape(outs["OUTPUT0"]["shape"])
    diff = np.array(outs["OUTPUT1"]["data"], np.float32).reshape(outs["OUTPUT1"]["shape"])
    ok = np.array_equal(total, a + b) and np.array_equal(diff, a - b)
    print("add_sub  JSON   shape %s  OUTPUT0[0,0,0,:3] %s  %s"
          % (outs["OUTPUT0"]["shape"], total[0, 0, 0, :3], "ok" if ok else "WRONG"))

    # add_sub over the binary extension: a batch of four, no JSON numbers at all.
    a = rng.random((4, 3, 224, 224), dtype=np.float32)
    b = rng.random((4, 3, 224, 224), dtype=np.float32)
    outs = infer_binary(url, "add_sub", [("INPUT0", "FP32", a), ("INPUT1", "FP32", b)],
                        ["OUTPUT0", "OUTPUT1"])
    ok = ok and np.array_equal(outs["OUTPUT0"], a + b) and np.array_equal(outs["OUTPUT1"], a - b)
    print("add_sub  binary shape %s  OUTPUT1[3,2,223,-3:] %s  %s"
          % (list(outs["OUTPUT1"].shape), outs["OUTPUT1"][3, 2, 223, -3:],
             "ok" if ok else "WRONG"))

    words = ["hello", "ptserve", "Mixed Case 42"]
    outs = infer_json(url, "text_upper", [("text", "BYTES", words)])
    print("text_upper %s -> %s" % (words, outs["UPPER"]["data"]))
    ok = ok and outs["UPPER"]["data"] == [w.upper() for w in words]

    features = rng.standard_normal((2, 16)).astype(np.float32)
    probs = infer_binary(url, "mlp_classifier", [("INPUT__0", "FP32", features)],
                         ["OUTPUT__0"])["OUTPUT__0"]
    print("mlp_classifier class probabilities:\n%s" % np.array2string(probs, precision=4))
    ok = ok and np.allclose(probs.sum(axis=1), 1.0, atol=1e-5)

    # Its AOTInductor twin (examples/export_aoti.py: same class, same weights)
    # must give the same probabilities, to float rounding.
    twin = infer_binary(url, "mlp_classifier_aoti", [("INPUT__0", "FP32", features)],
                        ["OUTPUT__0"])["OUTPUT__0"]
    same = np.allclose(twin, probs, rtol=1e-5, atol=1e-6)
    print("mlp_classifier_aoti (AOTInductor) %s" % ("same probabilities" if same else "DIFFERENT"))
    ok = ok and same

    # accumulator: a sequence (docs/sequence-batching.md); the server keeps
    # the running sum between the requests of sequence 42.
    sums = []
    for k, v in enumerate([1.0, 2.0, 3.0]):
        body = {"inputs": [{"name": "INPUT__0", "datatype": "FP32", "shape": [1, 4],
                            "data": [v] * 4}],
                "parameters": {"sequence_id": 42, "sequence_start": k == 0,
                               "sequence_end": k == 2}}
        r = requests.post("%s/v2/models/accumulator/infer" % url, json=body, timeout=60)
        r.raise_for_status()
        sums.append(r.json()["outputs"][0]["data"][0])
    print("accumulator running sums %s  %s" % (sums, "ok" if sums == [1, 3, 6] else "WRONG"))
    ok = ok and sums == [1, 3, 6]

    # The ensemble classify_standardized runs standardize, then mlp_classifier,
    # inside the server: it must agree with asking the two models in turn.
    raw = rng.standard_normal((3, 16)).astype(np.float32) * 2.0 + 0.5
    chained = infer_binary(url, "classify_standardized", [("RAW", "FP32", raw)],
                           ["PROBS"])["PROBS"]
    step1 = infer_binary(url, "standardize", [("INPUT__0", "FP32", raw)],
                         ["OUTPUT__0"])["OUTPUT__0"]
    by_hand = infer_binary(url, "mlp_classifier", [("INPUT__0", "FP32", step1)],
                           ["OUTPUT__0"])["OUTPUT__0"]
    same = np.allclose(chained, by_hand, rtol=1e-6, atol=1e-7)
    print("classify_standardized (ensemble) %s" % ("same as the two steps" if same else "DIFFERENT"))
    ok = ok and same
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
