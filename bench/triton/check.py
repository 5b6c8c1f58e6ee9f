"""Checks that both servers of bench/triton answer what torch computes.

    .venv/bin/python bench/triton/check.py REPO NAME=HTTP_ADDR,GRPC_ADDR ...

For each server, each protocol (NVIDIA's tritonclient, HTTP and gRPC) and
each model of bench/triton (mlp, add_sub), sends random inputs of batch 1
and 3 and compares every output with the model's own forward() run by
torch on the same inputs (REPO/<model>/1/model.pt). Exits 1, naming the
server, protocol, model and output, on the first answer that differs by
more than 1e-6, so that no benchmark figure is ever taken from a server
that computes something else.
"""
import sys

import numpy as np
import torch
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

MODELS = {"mlp": (["INPUT0"], ["OUTPUT0"]), "add_sub": (["INPUT0", "INPUT1"], ["OUTPUT0", "OUTPUT1"])}


def expected(repo, model, arrays):
    module = torch.jit.load(f"{repo}/{model}/1/model.pt")
    with torch.no_grad():
        out = module(*[torch.from_numpy(a) for a in arrays])
    return [t.numpy() for t in (out if isinstance(out, tuple) else (out,))]


def ask(lib, addr, model, names, outs, arrays):
    client = lib.InferenceServerClient(addr)
    inputs = []
    for name, a in zip(names, arrays):
        i = lib.InferInput(name, list(a.shape), "FP32")
        i.set_data_from_numpy(a)
        inputs.append(i)
    result = client.infer(model, inputs, outputs=[lib.InferRequestedOutput(o) for o in outs])
    return [result.as_numpy(o) for o in outs]


def main(argv):
    repo, servers = argv[1], argv[2:]
    rng = np.random.default_rng(0)
    for spec in servers:
        server, _, addrs = spec.partition("=")
        http_addr, grpc_addr = addrs.split(",")
        for proto, lib, addr in (("HTTP", httpclient, http_addr), ("gRPC", grpcclient, grpc_addr)):
            for model, (names, outs) in MODELS.items():
                for batch in (1, 3):
                    arrays = [rng.standard_normal((batch, 16), dtype=np.float32) for _ in names]
                    want = expected(repo, model, arrays)
                    got = ask(lib, addr, model, names, outs, arrays)
                    for o, w, g in zip(outs, want, got):
                        if g is None or g.shape != w.shape or not np.allclose(g, w, rtol=0, atol=1e-6):
                            print(f"check.py: {server} over {proto}: {model} {o} at batch {batch} "
                                  f"differs from torch's forward()", file=sys.stderr)
                            return 1
        print(f"check.py: {server}: mlp and add_sub over HTTP and gRPC match torch's forward()")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
