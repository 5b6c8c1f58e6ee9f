"""Tracing over gRPC: the TraceSetting rpc (Triton's qa/L0_trace gRPC cases)
and the timestamps of a traced ModelInfer, in order."""
import json

import numpy as np
import pytest

from conftest import need_module

grpc = need_module("grpc")

from test_grpc import REPO, TIMEOUT, assert_clean_exit, launch, pb  # noqa: E402,F401 (fixture)

ORDER = ["GRPC_WAITREAD_START", "GRPC_WAITREAD_END", "REQUEST_START", "QUEUE_START",
         "COMPUTE_START", "COMPUTE_INPUT_END", "COMPUTE_OUTPUT_START", "COMPUTE_END",
         "REQUEST_END", "GRPC_SEND_START", "GRPC_SEND_END"]


def as_dict(resp):
    return {k: list(v.value) for k, v in resp.settings.items()}


def test_trace_grpc(ptserve_bin, pb, tmp_path):  # noqa: F811
    trace_file = str(tmp_path / "global_unittest.log")
    server = launch(ptserve_bin, REPO, tmp_path / "server.log",
                    "--trace-config", "triton,file=" + trace_file,
                    "--trace-config", "level=TIMESTAMPS", "--trace-config", "rate=1")
    ch = grpc.insecure_channel(server.grpc_target)
    stub = pb.svc_grpc.GRPCInferenceServiceStub(ch)
    TS = pb.svc.TraceSettingRequest
    initial = {"trace_file": [trace_file], "trace_level": ["TIMESTAMPS"], "trace_rate": ["1"],
               "trace_count": ["-1"], "log_frequency": ["0"], "trace_mode": ["triton"]}
    assert as_dict(stub.TraceSetting(TS(), timeout=TIMEOUT)) == initial
    model = as_dict(stub.TraceSetting(TS(model_name="id_fp32"), timeout=TIMEOUT))
    assert model == dict(initial, profile_executions=["0"])

    # Global update reaches the model (qa/L0_trace test_grpc_update_settings).
    req = TS()
    req.settings["trace_level"].value.extend(["TIMESTAMPS", "TENSORS"])
    both = dict(initial, trace_level=["TIMESTAMPS", "TENSORS"])
    assert as_dict(stub.TraceSetting(req, timeout=TIMEOUT)) == both
    model = as_dict(stub.TraceSetting(TS(model_name="id_fp32"), timeout=TIMEOUT))
    assert model == dict(both, profile_executions=["0"])
    # A key with no values clears it: back to the start-up value.
    req = TS()
    req.settings["trace_level"].value.extend([])
    req.settings["trace_level"].SetInParent()
    assert as_dict(stub.TraceSetting(req, timeout=TIMEOUT)) == initial

    with pytest.raises(grpc.RpcError) as info:
        stub.TraceSetting(TS(model_name="does-not-exist"), timeout=TIMEOUT)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "Request for unknown model : does-not-exist" in info.value.details()
    req = TS(model_name="id_fp32")
    req.settings["trace_file"].value.append("model.log")
    with pytest.raises(grpc.RpcError) as info:
        stub.TraceSetting(req, timeout=TIMEOUT)
    assert info.value.code() == grpc.StatusCode.UNIMPLEMENTED
    assert info.value.details() == "trace file location can not be updated through network protocol"

    # One traced inference.
    data = np.array([[1, 2, 3, 4]], dtype=np.float32)
    infer = pb.svc.ModelInferRequest(model_name="id_fp32", id="g1")
    infer.inputs.add(name="INPUT0", datatype="FP32", shape=[1, 4])
    infer.raw_input_contents.append(data.tobytes())
    resp = stub.ModelInfer(infer, timeout=TIMEOUT)
    assert np.frombuffer(resp.raw_output_contents[0], dtype=np.float32).tolist() == [1, 2, 3, 4]
    ch.close()
    assert_clean_exit(server)

    with open(trace_file) as f:
        items = json.load(f)
    header = [i for i in items if "model_name" in i]
    assert len(header) == 1 and header[0]["request_id"] == "g1"
    stamps = [s for i in items if "timestamps" in i for s in i["timestamps"]]
    ns = {s["name"]: s["ns"] for s in stamps}
    for point in ORDER:
        assert point in ns, (point, ns)
    for a, b in zip(ORDER, ORDER[1:]):
        assert ns[a] <= ns[b], (a, b, ns)
