"""KServe v2 gRPC (GRPCInferenceService + grpc.health.v1), end to end.

Python stubs are generated at test time from proto/ with Debian's protoc and
grpc plugin (or grpc_tools when present); they stand in for tritonclient.grpc,
which speaks the same messages. One server serves tests/e2e/repos/identity
for the module (it also proves the server survives every bad request below)
and must stop on SIGTERM with exit code 0 and no sanitizer report.

Expected values never come from ptserve: the identity backend echoes input i
as output i, so the expected output is what the test sent, encoded here with
numpy and the protocol's rules (protocol-facts §2, §5); status codes come from
the mapping table of protocol-facts §1.2; metadata and configs from the
committed config.pbtxt files.
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import types

import numpy as np
import pytest
import requests

from conftest import (ROOT, assert_clean_exit, assert_no_sanitizer_report, bf16_bytes,
                      bytes_encode, free_port, launch_server, missing_tool, module_server,
                      need_module)

grpc = need_module("grpc")

TIMEOUT = 10
SVC = "/inference.GRPCInferenceService/"
REPO = os.path.join(ROOT, "tests", "e2e", "repos", "identity")

# protocol datatype -> (model, numpy dtype or None, values, typed contents field)
DTYPES = {
    "BOOL": ("dt_bool", np.bool_, [True, False, True, True], "bool_contents"),
    "UINT8": ("dt_uint8", np.uint8, [0, 1, 200, 255], "uint_contents"),
    "UINT16": ("dt_uint16", np.uint16, [0, 1, 40000, 65535], "uint_contents"),
    "UINT32": ("dt_uint32", np.uint32, [0, 1, 3000000000, 4294967295], "uint_contents"),
    "UINT64": ("dt_uint64", np.uint64, [0, 1, 2**40 + 3, 2**64 - 1], "uint64_contents"),
    "INT8": ("dt_int8", np.int8, [-128, -1, 0, 127], "int_contents"),
    "INT16": ("dt_int16", np.int16, [-32768, -2, 7, 32767], "int_contents"),
    "INT32": ("dt_int32", np.int32, [-2**31, -3, 5, 2**31 - 1], "int_contents"),
    "INT64": ("dt_int64", np.int64, [-2**63, -4, 9, 2**63 - 1], "int64_contents"),
    "FP16": ("dt_fp16", np.float16, [0.5, -2.0, 65504.0, 1.0 / 3.0], None),
    "FP32": ("dt_fp32", np.float32, [1.5, -2.25, 3.0e38, 1.0 / 3.0], "fp32_contents"),
    "FP64": ("dt_fp64", np.float64, [1.0 / 3.0, -1e300, 5e-324, 0.1], "fp64_contents"),
    "BF16": ("dt_bf16", None, [1.0, -2.5, 3.140625, 1.0e30], None),
    "BYTES": ("dt_bytes", None, ["hello", "", "\u00fcn\u00efcode", "a\x00b"], "bytes_contents"),
}
TYPED_DTYPES = [d for d, row in DTYPES.items() if row[3]]


# ---------------------------------------------------------------- encodings

def raw_bytes(dtype, values):
    if dtype == "BF16":
        return bf16_bytes(values)
    if dtype == "BYTES":
        return bytes_encode(values)
    return np.array(values, dtype=DTYPES[dtype][1]).astype(
        np.dtype(DTYPES[dtype][1]).newbyteorder("<")).tobytes()


# ---------------------------------------------------------------- stubs and server

@pytest.fixture(scope="session")
def pb(tmp_path_factory):
    """grpc_service_pb2 & co., generated from proto/ into a temp dir."""
    out = str(tmp_path_factory.mktemp("grpc_stubs"))
    proto_dir = os.path.join(ROOT, "proto")
    protos = [os.path.join(proto_dir, p)
              for p in ("model_config.proto", "grpc_service.proto", "health.proto")]
    try:
        import grpc_tools  # noqa: F401
        cmd = [sys.executable, "-m", "grpc_tools.protoc"]
        plugin = []
    except ImportError:
        cmd = [shutil.which("protoc") or "protoc"]
        plugin_path = shutil.which("grpc_python_plugin")
        if not plugin_path:
            missing_tool("a gRPC Python stub generator (grpcio-tools, or Debian's "
                         "protobuf-compiler-grpc for grpc_python_plugin)")
        plugin = ["--plugin=protoc-gen-grpc_python=" + plugin_path]
    subprocess.run(cmd + ["--proto_path", proto_dir, "--python_out", out, "--grpc_python_out", out]
                   + plugin + protos, check=True)
    sys.path.insert(0, out)
    import grpc_service_pb2
    import grpc_service_pb2_grpc
    import health_pb2
    import health_pb2_grpc
    return types.SimpleNamespace(svc=grpc_service_pb2, svc_grpc=grpc_service_pb2_grpc,
                                 health=health_pb2, health_grpc=health_pb2_grpc)


def launch(bin_path, repo, log_path, *args, expect_ready=True, timeout=60, env=None):
    return launch_server(bin_path, repo, log_path, *args, metrics_port=0, grpc_port=free_port(),
                         grpc_address="127.0.0.1", expect_ready=expect_ready, timeout=timeout,
                         env=env)


server = module_server(launch, "grpc")


@pytest.fixture(scope="module")
def channel(server):
    ch = grpc.insecure_channel(server.grpc_target)
    grpc.channel_ready_future(ch).result(timeout=TIMEOUT)
    yield ch
    ch.close()


@pytest.fixture
def stub(channel, pb):
    return pb.svc_grpc.GRPCInferenceServiceStub(channel)


def expect_code(fn, code, words=()):
    """Calls fn, expects an RpcError with `code`; its message must mention
    one of `words` (case-insensitive) when given."""
    with pytest.raises(grpc.RpcError) as info:
        fn()
    err = info.value
    assert err.code() == code, (err.code(), err.details())
    if words:
        msg = (err.details() or "").lower()
        assert any(w.lower() in msg for w in words), err.details()
    return err


def infer_request(pb, model, inputs, outputs=(), rid="", version=""):
    """inputs: [(name, datatype, shape, raw bytes)]."""
    req = pb.svc.ModelInferRequest(model_name=model, model_version=version, id=rid)
    for name, dt, shape, raw in inputs:
        t = req.inputs.add()
        t.name, t.datatype = name, dt
        t.shape.extend(shape)
        req.raw_input_contents.append(raw)
    for name in outputs:
        req.outputs.add().name = name
    return req


# ---------------------------------------------------------------- health, metadata

def test_server_live_and_ready(stub, pb):
    assert stub.ServerLive(pb.svc.ServerLiveRequest(), timeout=TIMEOUT).live is True
    assert stub.ServerReady(pb.svc.ServerReadyRequest(), timeout=TIMEOUT).ready is True


def test_health_check(channel, pb):
    h = pb.health_grpc.HealthStub(channel)
    r = h.Check(pb.health.HealthCheckRequest(service=""), timeout=TIMEOUT)
    assert r.status == pb.health.HealthCheckResponse.SERVING


def test_server_metadata(stub, pb, server):
    md = stub.ServerMetadata(pb.svc.ServerMetadataRequest(), timeout=TIMEOUT)
    http = requests.get(server.url + "/v2", timeout=TIMEOUT).json()
    # Same document on both protocols.
    assert md.name == http["name"] and md.version == http["version"]
    assert md.version
    for ext in ("model_configuration", "model_repository", "binary_tensor_data", "logging"):
        assert ext in md.extensions
    # Whatever HTTP reports, gRPC serves too (it adds LogSettings).
    assert set(http["extensions"]) <= set(md.extensions)


def test_model_ready(stub, pb):
    assert stub.ModelReady(pb.svc.ModelReadyRequest(name="id_fp32"), timeout=TIMEOUT).ready
    assert stub.ModelReady(pb.svc.ModelReadyRequest(name="id_all_versions", version="2"),
                           timeout=TIMEOUT).ready
    # An unknown model or version: ready=false with status OK, as
    # tritonserver r25.07's core answers (InferenceServer::ModelIsReady).
    assert not stub.ModelReady(pb.svc.ModelReadyRequest(name="no_such_model"),
                               timeout=TIMEOUT).ready
    assert not stub.ModelReady(pb.svc.ModelReadyRequest(name="id_fp32", version="7"),
                               timeout=TIMEOUT).ready
    expect_code(lambda: stub.ModelReady(pb.svc.ModelReadyRequest(name="id_fp32", version="x1"),
                                        timeout=TIMEOUT),
                grpc.StatusCode.INVALID_ARGUMENT, ["version"])
    expect_code(lambda: stub.ModelReady(pb.svc.ModelReadyRequest(name="id_fp32", version="-1"),
                                        timeout=TIMEOUT),
                grpc.StatusCode.INVALID_ARGUMENT, ["version"])


def shape_of(t):
    return list(t.shape)


def test_model_metadata(stub, pb):
    md = stub.ModelMetadata(pb.svc.ModelMetadataRequest(name="id_fp32"), timeout=TIMEOUT)
    assert md.name == "id_fp32" and list(md.versions) == ["1"] and md.platform == "identity"
    assert [(t.name, t.datatype, shape_of(t)) for t in md.inputs] == [("INPUT0", "FP32", [-1, 4])]
    assert [(t.name, t.datatype, shape_of(t)) for t in md.outputs] == [("OUTPUT0", "FP32", [-1, 4])]
    # No batching: dims as configured, no leading -1.
    md = stub.ModelMetadata(pb.svc.ModelMetadataRequest(name="id_nobatch"), timeout=TIMEOUT)
    assert [(t.name, t.datatype, shape_of(t)) for t in md.inputs] == [("INPUT0", "FP32", [-1, 2])]
    md = stub.ModelMetadata(pb.svc.ModelMetadataRequest(name="id_multi"), timeout=TIMEOUT)
    assert [(t.name, t.datatype, shape_of(t)) for t in md.inputs] == [
        ("INPUT0", "INT32", [-1, 3]), ("INPUT1", "BYTES", [-1, -1])]
    # Every served version, ascending; one version when asked for one.
    md = stub.ModelMetadata(pb.svc.ModelMetadataRequest(name="id_all_versions"), timeout=TIMEOUT)
    assert list(md.versions) == ["1", "2", "3"]
    md = stub.ModelMetadata(pb.svc.ModelMetadataRequest(name="id_all_versions", version="2"),
                            timeout=TIMEOUT)
    assert list(md.versions) == ["2"]
    expect_code(lambda: stub.ModelMetadata(pb.svc.ModelMetadataRequest(name="nope"),
                                           timeout=TIMEOUT),
                grpc.StatusCode.NOT_FOUND, ["nope"])
    # id_specific serves version 1 only; version 2 is on disk but not served.
    expect_code(lambda: stub.ModelMetadata(
        pb.svc.ModelMetadataRequest(name="id_specific", version="2"), timeout=TIMEOUT),
        grpc.StatusCode.NOT_FOUND)


def test_model_metadata_datatypes(stub, pb):
    for dt, (model, _, _, _) in DTYPES.items():
        md = stub.ModelMetadata(pb.svc.ModelMetadataRequest(name=model), timeout=TIMEOUT)
        assert [(t.datatype, shape_of(t)) for t in md.inputs] == [(dt, [-1, -1])], model


def test_model_config(stub, pb, server):
    cfg = stub.ModelConfig(pb.svc.ModelConfigRequest(name="id_multi"), timeout=TIMEOUT).config
    # From tests/e2e/repos/identity/id_multi/config.pbtxt.
    assert cfg.name == "id_multi" and cfg.backend == "identity" and cfg.max_batch_size == 8
    assert [(i.name, i.data_type, list(i.dims)) for i in cfg.input] == [
        ("INPUT0", 8, [3]), ("INPUT1", 13, [-1])]  # TYPE_INT32 = 8, TYPE_STRING = 13
    assert [(o.name, o.data_type, list(o.dims)) for o in cfg.output] == [
        ("OUTPUT0", 8, [3]), ("OUTPUT1", 13, [-1])]
    # version_policy { all {} }: an empty sub-message must stay present.
    cfg = stub.ModelConfig(pb.svc.ModelConfigRequest(name="id_all_versions"),
                           timeout=TIMEOUT).config
    assert cfg.version_policy.HasField("all")
    # The same completed config as GET /config.
    http = requests.get(server.url + "/v2/models/id_all_versions/config", timeout=TIMEOUT).json()
    assert http["name"] == cfg.name and http["max_batch_size"] == cfg.max_batch_size
    assert len(http["instance_group"]) == len(cfg.instance_group)
    expect_code(lambda: stub.ModelConfig(pb.svc.ModelConfigRequest(name="nope"), timeout=TIMEOUT),
                grpc.StatusCode.NOT_FOUND, ["nope"])


def test_repository_index(stub, pb):
    models = {d for d in os.listdir(REPO) if os.path.isdir(os.path.join(REPO, d))}
    for ready in (False, True):
        r = stub.RepositoryIndex(pb.svc.RepositoryIndexRequest(ready=ready), timeout=TIMEOUT)
        got = {}
        for m in r.models:
            got.setdefault(m.name, []).append((m.version, m.state))
        assert set(got) == models
        assert got["id_fp32"] == [("1", "READY")]
        assert sorted(got["id_all_versions"]) == [("1", "READY"), ("2", "READY"), ("3", "READY")]
        assert ("2", "READY") in got["id_versions"]


def test_repository_load_unload_refused_in_none_mode(stub, pb):
    # tritonserver's answer outside explicit mode (protocol-facts §1.12):
    # UNAVAILABLE, "explicit model load / unload is not allowed ...".
    words = ["explicit model load / unload is not allowed", "NONE"]
    expect_code(lambda: stub.RepositoryModelLoad(
        pb.svc.RepositoryModelLoadRequest(model_name="id_fp32"), timeout=TIMEOUT),
        grpc.StatusCode.UNAVAILABLE, words)
    expect_code(lambda: stub.RepositoryModelUnload(
        pb.svc.RepositoryModelUnloadRequest(model_name="id_fp32"), timeout=TIMEOUT),
        grpc.StatusCode.UNAVAILABLE, words)
    expect_code(lambda: stub.RepositoryModelLoad(
        pb.svc.RepositoryModelLoadRequest(repository_name="other", model_name="id_fp32"),
        timeout=TIMEOUT), grpc.StatusCode.UNIMPLEMENTED, ["repository_name"])
    # Still served after the refused unload.
    assert stub.ModelReady(pb.svc.ModelReadyRequest(name="id_fp32"), timeout=TIMEOUT).ready


@pytest.mark.parametrize("rpc,request_type", [
    ("SystemSharedMemoryRegister", "SystemSharedMemoryRegisterRequest"),
    ("SystemSharedMemoryUnregister", "SystemSharedMemoryUnregisterRequest"),
    ("CudaSharedMemoryRegister", "CudaSharedMemoryRegisterRequest"),
    ("CudaSharedMemoryUnregister", "CudaSharedMemoryUnregisterRequest"),
])
def test_shared_memory_needs_allow_client_shm(stub, pb, rpc, request_type):
    """This server runs without --allow-client-shm (Triton's default): the
    shared-memory rpcs that change or use regions say which flag is missing
    (test_shm.py covers the extension itself)."""
    req = getattr(pb.svc, request_type)(name="r")
    expect_code(lambda: getattr(stub, rpc)(req, timeout=TIMEOUT),
                grpc.StatusCode.UNIMPLEMENTED, ["--allow-client-shm=true"])


def test_shared_memory_status_without_regions(stub, pb):
    assert len(stub.SystemSharedMemoryStatus(pb.svc.SystemSharedMemoryStatusRequest(),
                                             timeout=TIMEOUT).regions) == 0
    assert len(stub.CudaSharedMemoryStatus(pb.svc.CudaSharedMemoryStatusRequest(),
                                           timeout=TIMEOUT).regions) == 0


def test_unknown_method(channel):
    call = channel.unary_unary(SVC + "NoSuchRpc")
    expect_code(lambda: call(b"", timeout=TIMEOUT), grpc.StatusCode.UNIMPLEMENTED)


def log_settings(resp):
    out = {}
    for k, v in resp.settings.items():
        out[k] = getattr(v, v.WhichOneof("parameter_choice"))
    return out


def test_log_settings(stub, pb):
    LS = pb.svc.LogSettingsRequest
    cur = log_settings(stub.LogSettings(LS(), timeout=TIMEOUT))
    assert set(cur) == {"log_file", "log_info", "log_warning", "log_error", "log_verbose_level",
                        "log_format"}
    assert cur["log_verbose_level"] == 0 and cur["log_format"] == "default"
    req = LS()
    req.settings["log_verbose_level"].uint32_param = 1
    assert log_settings(stub.LogSettings(req, timeout=TIMEOUT))["log_verbose_level"] == 1
    assert log_settings(stub.LogSettings(LS(), timeout=TIMEOUT))["log_verbose_level"] == 1
    req = LS()
    req.settings["log_verbose_level"].uint32_param = 0
    assert log_settings(stub.LogSettings(req, timeout=TIMEOUT))["log_verbose_level"] == 0
    bad = LS()
    bad.settings["log_info"].string_param = "yes"
    expect_code(lambda: stub.LogSettings(bad, timeout=TIMEOUT),
                grpc.StatusCode.INVALID_ARGUMENT, ["log_info"])
    bad = LS()
    bad.settings["log_file"].string_param = "/tmp/x.log"
    expect_code(lambda: stub.LogSettings(bad, timeout=TIMEOUT),
                grpc.StatusCode.UNIMPLEMENTED, ["log_file"])
    bad = LS()
    bad.settings["log_colour"].bool_param = True
    expect_code(lambda: stub.LogSettings(bad, timeout=TIMEOUT),
                grpc.StatusCode.INVALID_ARGUMENT, ["log_colour"])
    # A rejected request changes nothing.
    assert log_settings(stub.LogSettings(LS(), timeout=TIMEOUT)) == cur


def test_model_statistics(stub, pb):
    # id_versions is used by no other test of this module.
    before = stub.ModelStatistics(pb.svc.ModelStatisticsRequest(name="id_versions"),
                                  timeout=TIMEOUT).model_stats
    assert [(s.name, s.version) for s in before] == [("id_versions", "2")]
    n0 = before[0].inference_stats.success.count
    for k in range(3):
        raw = np.array([[k, k + 1], [k + 2, k + 3]], dtype="<i4").tobytes()
        stub.ModelInfer(infer_request(pb, "id_versions", [("INPUT0", "INT32", [2, 2], raw)]),
                        timeout=TIMEOUT)
    after = stub.ModelStatistics(pb.svc.ModelStatisticsRequest(name="id_versions"),
                                 timeout=TIMEOUT).model_stats[0]
    assert after.inference_stats.success.count == n0 + 3
    assert after.inference_count == before[0].inference_count + 6  # 3 requests of batch 2
    assert after.inference_stats.HasField("cache_hit")  # perf_analyzer reads every member
    everything = stub.ModelStatistics(pb.svc.ModelStatisticsRequest(), timeout=TIMEOUT)
    assert "id_versions" in {s.name for s in everything.model_stats}
    expect_code(lambda: stub.ModelStatistics(pb.svc.ModelStatisticsRequest(name="nope"),
                                             timeout=TIMEOUT),
                grpc.StatusCode.INVALID_ARGUMENT, ["nope"])


# ---------------------------------------------------------------- ModelInfer

def check_echo(resp, model, dtype, shape, raw, rid=""):
    assert resp.model_name == model and resp.model_version == "1" and resp.id == rid
    assert [(o.name, o.datatype, list(o.shape)) for o in resp.outputs] == [
        ("OUTPUT0", dtype, shape)]
    # raw_output_contents always, never typed contents.
    assert not resp.outputs[0].HasField("contents")
    assert list(resp.raw_output_contents) == [raw]


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_infer_raw(stub, pb, dtype):
    model, _, values, _ = DTYPES[dtype]
    raw = raw_bytes(dtype, values)
    req = infer_request(pb, model, [("INPUT0", dtype, [1, len(values)], raw)], rid="r-" + dtype)
    check_echo(stub.ModelInfer(req, timeout=TIMEOUT), model, dtype, [1, len(values)], raw,
               "r-" + dtype)


@pytest.mark.parametrize("dtype", TYPED_DTYPES)
def test_infer_typed(stub, pb, dtype):
    model, _, values, field = DTYPES[dtype]
    req = pb.svc.ModelInferRequest(model_name=model)
    t = req.inputs.add()
    t.name, t.datatype = "INPUT0", dtype
    t.shape.extend([2, 2])
    items = [v.encode() if isinstance(v, str) else v for v in values]
    getattr(t.contents, field).extend(items)
    check_echo(stub.ModelInfer(req, timeout=TIMEOUT), model, dtype, [2, 2],
               raw_bytes(dtype, values))


@pytest.mark.parametrize("dtype", ["FP16", "BF16"])
def test_infer_typed_half_precision_refused(stub, pb, dtype):
    req = pb.svc.ModelInferRequest(model_name=DTYPES[dtype][0])
    t = req.inputs.add()
    t.name, t.datatype = "INPUT0", dtype
    t.shape.extend([1, 1])
    t.contents.fp32_contents.append(1.0)
    expect_code(lambda: stub.ModelInfer(req, timeout=TIMEOUT),
                grpc.StatusCode.INVALID_ARGUMENT, ["raw"])


def test_infer_multi_and_requested_outputs(stub, pb):
    a = np.array([[1, 2, 3], [4, 5, 6]], dtype="<i4").tobytes()
    b = bytes_encode(["x", "yz", "", "w"])
    inputs = [("INPUT0", "INT32", [2, 3], a), ("INPUT1", "BYTES", [2, 2], b)]
    r = stub.ModelInfer(infer_request(pb, "id_multi", inputs), timeout=TIMEOUT)
    assert [o.name for o in r.outputs] == ["OUTPUT0", "OUTPUT1"]
    assert list(r.raw_output_contents) == [a, b]
    r = stub.ModelInfer(infer_request(pb, "id_multi", inputs, outputs=["OUTPUT1"]),
                        timeout=TIMEOUT)
    assert [(o.name, o.datatype, list(o.shape)) for o in r.outputs] == [
        ("OUTPUT1", "BYTES", [2, 2])]
    assert list(r.raw_output_contents) == [b]


def test_infer_versions_and_parameters(stub, pb):
    raw = np.array([[7, 8]], dtype="<i4").tobytes()
    for v in ("1", "3", ""):
        req = infer_request(pb, "id_all_versions", [("INPUT0", "INT32", [1, 2], raw)], version=v)
        req.parameters["priority"].int64_param = 0
        req.parameters["timeout"].int64_param = 5000000
        req.parameters["my_custom"].string_param = "anything"
        r = stub.ModelInfer(req, timeout=TIMEOUT)
        assert r.model_version == (v or "3") and list(r.raw_output_contents) == [raw]


def test_infer_empty_tensor(stub, pb):
    req = infer_request(pb, "dt_fp32", [("INPUT0", "FP32", [1, 0], b"")])
    r = stub.ModelInfer(req, timeout=TIMEOUT)
    assert list(r.outputs[0].shape) == [1, 0] and list(r.raw_output_contents) == [b""]


def test_infer_large_message(server, pb):
    # 16 MiB in and out, above gRPC's 4 MiB default limit: ptserve allows
    # INT32_MAX, as tritonserver does (and tritonclient sets on its channel).
    opts = [("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)]
    x = np.arange(4 * 1024 * 1024, dtype="<f4").reshape(1, -1)
    with grpc.insecure_channel(server.grpc_target, options=opts) as ch:
        stub = pb.svc_grpc.GRPCInferenceServiceStub(ch)
        r = stub.ModelInfer(infer_request(pb, "dt_fp32", [("INPUT0", "FP32", list(x.shape),
                                                          x.tobytes())]), timeout=60)
    assert r.raw_output_contents[0] == x.tobytes()


def test_infer_compressed_request(server, pb):
    with grpc.insecure_channel(server.grpc_target, compression=grpc.Compression.Gzip) as ch:
        stub = pb.svc_grpc.GRPCInferenceServiceStub(ch)
        raw = np.zeros((1, 4096), dtype="<f4").tobytes()
        r = stub.ModelInfer(infer_request(pb, "dt_fp32", [("INPUT0", "FP32", [1, 4096], raw)]),
                            timeout=TIMEOUT)
        assert r.raw_output_contents[0] == raw


# ---------------------------------------------------------------- bad inputs

def good_fp32(pb):
    raw = np.array([[1, 2, 3, 4]], dtype="<f4").tobytes()
    return infer_request(pb, "id_fp32", [("INPUT0", "FP32", [1, 4], raw)])


def test_bad_undecodable_messages(channel, stub, pb):
    infer = channel.unary_unary(SVC + "ModelInfer")  # bytes in, bytes out
    for junk in (b"\xff\xff\xff\xff", b"\x0a\x80", b"\x3a\x10abc", b"\x0b\x0c"):
        expect_code(lambda: infer(junk, timeout=TIMEOUT), grpc.StatusCode.INVALID_ARGUMENT,
                    ["parse", "ModelInferRequest"])
    meta = channel.unary_unary(SVC + "ModelMetadata")
    expect_code(lambda: meta(b"\x0a\x05ab", timeout=TIMEOUT), grpc.StatusCode.INVALID_ARGUMENT,
                ["parse"])
    assert stub.ModelInfer(good_fp32(pb), timeout=TIMEOUT).raw_output_contents


def test_bad_raw_and_typed_together(stub, pb):
    req = good_fp32(pb)
    t = req.inputs.add()
    t.name, t.datatype = "INPUT1", "FP32"
    t.shape.extend([1, 4])
    t.contents.fp32_contents.extend([1, 2, 3, 4])
    expect_code(lambda: stub.ModelInfer(req, timeout=TIMEOUT), grpc.StatusCode.INVALID_ARGUMENT,
                ["raw_input_contents"])
    # Typed on the only input plus a stray raw entry.
    req = pb.svc.ModelInferRequest(model_name="id_fp32")
    t = req.inputs.add()
    t.name, t.datatype = "INPUT0", "FP32"
    t.shape.extend([1, 4])
    t.contents.fp32_contents.extend([1, 2, 3, 4])
    req.raw_input_contents.append(b"\0" * 16)
    expect_code(lambda: stub.ModelInfer(req, timeout=TIMEOUT), grpc.StatusCode.INVALID_ARGUMENT,
                ["raw_input_contents"])


def test_bad_raw_size(stub, pb):
    req = infer_request(pb, "id_fp32", [("INPUT0", "FP32", [1, 4], b"\0" * 15)])
    expect_code(lambda: stub.ModelInfer(req, timeout=TIMEOUT), grpc.StatusCode.INVALID_ARGUMENT,
                ["INPUT0"])
    # BYTES: a truncated element.
    req = infer_request(pb, "dt_bytes", [("INPUT0", "BYTES", [1, 1], b"\x05\0\0\0ab")])
    expect_code(lambda: stub.ModelInfer(req, timeout=TIMEOUT), grpc.StatusCode.INVALID_ARGUMENT,
                ["INPUT0"])


def test_bad_raw_count(stub, pb):
    req = good_fp32(pb)
    del req.raw_input_contents[:]
    expect_code(lambda: stub.ModelInfer(req, timeout=TIMEOUT), grpc.StatusCode.INVALID_ARGUMENT,
                ["INPUT0"])
    req = good_fp32(pb)
    req.raw_input_contents.append(b"\0" * 16)
    expect_code(lambda: stub.ModelInfer(req, timeout=TIMEOUT), grpc.StatusCode.INVALID_ARGUMENT,
                ["raw_input_contents"])


def test_bad_unknown_model_and_version(stub, pb):
    req = good_fp32(pb)
    req.model_name = "no_such_model"
    expect_code(lambda: stub.ModelInfer(req, timeout=TIMEOUT), grpc.StatusCode.NOT_FOUND,
                ["no_such_model"])
    req = good_fp32(pb)
    req.model_version = "7"
    expect_code(lambda: stub.ModelInfer(req, timeout=TIMEOUT), grpc.StatusCode.NOT_FOUND)
    req.model_version = "one"
    expect_code(lambda: stub.ModelInfer(req, timeout=TIMEOUT), grpc.StatusCode.INVALID_ARGUMENT,
                ["version"])


def test_bad_unknown_output_and_input(stub, pb):
    req = good_fp32(pb)
    req.outputs.add().name = "NOPE"
    expect_code(lambda: stub.ModelInfer(req, timeout=TIMEOUT), grpc.StatusCode.INVALID_ARGUMENT,
                ["NOPE"])
    req = good_fp32(pb)
    req.inputs[0].name = "INPUTX"
    expect_code(lambda: stub.ModelInfer(req, timeout=TIMEOUT), grpc.StatusCode.INVALID_ARGUMENT,
                ["INPUTX"])


def test_bad_datatypes_and_contents(stub, pb):
    req = good_fp32(pb)
    req.inputs[0].datatype = "FLOAT"
    expect_code(lambda: stub.ModelInfer(req, timeout=TIMEOUT), grpc.StatusCode.INVALID_ARGUMENT,
                ["FLOAT"])
    req = good_fp32(pb)
    req.inputs[0].datatype = "INT32"  # config says FP32
    expect_code(lambda: stub.ModelInfer(req, timeout=TIMEOUT), grpc.StatusCode.INVALID_ARGUMENT,
                ["INT32"])

    def typed(field, values, shape=(1, 4)):
        r = pb.svc.ModelInferRequest(model_name="id_fp32")
        t = r.inputs.add()
        t.name, t.datatype = "INPUT0", "FP32"
        t.shape.extend(shape)
        getattr(t.contents, field).extend(values)
        return r

    expect_code(lambda: stub.ModelInfer(typed("int_contents", [1, 2, 3, 4]), timeout=TIMEOUT),
                grpc.StatusCode.INVALID_ARGUMENT, ["fp32_contents"])
    expect_code(lambda: stub.ModelInfer(typed("fp32_contents", [1, 2, 3]), timeout=TIMEOUT),
                grpc.StatusCode.INVALID_ARGUMENT, ["elements"])
    # INT8 in int_contents must fit in 8 bits.
    r = pb.svc.ModelInferRequest(model_name="dt_int8")
    t = r.inputs.add()
    t.name, t.datatype = "INPUT0", "INT8"
    t.shape.extend([1, 2])
    t.contents.int_contents.extend([1, 300])
    expect_code(lambda: stub.ModelInfer(r, timeout=TIMEOUT), grpc.StatusCode.INVALID_ARGUMENT,
                ["range"])
    req = good_fp32(pb)
    req.inputs[0].shape[:] = [1, -4]
    expect_code(lambda: stub.ModelInfer(req, timeout=TIMEOUT), grpc.StatusCode.INVALID_ARGUMENT,
                ["shape"])
    req = good_fp32(pb)
    req.inputs[0].shape[:] = [1, 2, 2]
    expect_code(lambda: stub.ModelInfer(req, timeout=TIMEOUT), grpc.StatusCode.INVALID_ARGUMENT,
                ["shape"])


def test_bad_parameters(stub, pb):
    req = good_fp32(pb)
    req.parameters["triton_something"].bool_param = True
    expect_code(lambda: stub.ModelInfer(req, timeout=TIMEOUT), grpc.StatusCode.INVALID_ARGUMENT,
                ["triton_something"])
    req = good_fp32(pb)
    req.parameters["priority"].string_param = "high"
    expect_code(lambda: stub.ModelInfer(req, timeout=TIMEOUT), grpc.StatusCode.INVALID_ARGUMENT,
                ["priority"])
    req = good_fp32(pb)
    req.inputs[0].parameters["shared_memory_region"].string_param = "r0"
    expect_code(lambda: stub.ModelInfer(req, timeout=TIMEOUT), grpc.StatusCode.INVALID_ARGUMENT,
                ["'shared_memory_byte_size' must be given"])
    req.inputs[0].parameters["shared_memory_byte_size"].int64_param = 16
    del req.raw_input_contents[:]
    # this server runs without --allow-client-shm
    expect_code(lambda: stub.ModelInfer(req, timeout=TIMEOUT), grpc.StatusCode.UNIMPLEMENTED,
                ["--allow-client-shm=true"])
    # classification must be a positive int64_param (tritonclient always
    # sends one; test_client_grpc.py checks the results)
    for set_param in (lambda p: setattr(p, "int64_param", 0),
                      lambda p: setattr(p, "string_param", "2")):
        req = good_fp32(pb)
        o = req.outputs.add()
        o.name = "OUTPUT0"
        set_param(o.parameters["classification"])
        expect_code(lambda: stub.ModelInfer(req, timeout=TIMEOUT),
                    grpc.StatusCode.INVALID_ARGUMENT, ["classification"])


def test_same_outputs_over_http_and_grpc(stub, pb, server):
    """For the same request, HTTP (binary tensor extension) and gRPC return
    the same datatype, shape and bytes."""
    for dtype, (model, _, values, _) in DTYPES.items():
        raw = raw_bytes(dtype, values)
        shape = [2, len(values) // 2]
        header = {"id": "same", "inputs": [{"name": "INPUT0", "datatype": dtype, "shape": shape,
                                            "parameters": {"binary_data_size": len(raw)}}],
                  "parameters": {"binary_data_output": True}}
        js = json.dumps(header).encode()
        r = requests.post(server.url + "/v2/models/%s/infer" % model, data=js + raw,
                          headers={"Inference-Header-Content-Length": str(len(js))},
                          timeout=TIMEOUT)
        assert r.status_code == 200, r.text[:300]
        n = int(r.headers["Inference-Header-Content-Length"])
        head = json.loads(r.content[:n])
        http_out = head["outputs"][0]
        g = stub.ModelInfer(infer_request(pb, model, [("INPUT0", dtype, shape, raw)], rid="same"),
                            timeout=TIMEOUT)
        assert (g.model_name, g.model_version, g.id) == (head["model_name"],
                                                         head["model_version"], head["id"])
        assert (g.outputs[0].name, g.outputs[0].datatype, list(g.outputs[0].shape)) == (
            http_out["name"], http_out["datatype"], http_out["shape"])
        assert g.raw_output_contents[0] == r.content[n:] == raw, dtype


# ---------------------------------------------------------------- ModelStreamInfer

def test_stream_1000_requests(stub, pb):
    N = 1000

    def requests_gen():
        for k in range(N):
            raw = np.array([[k, -k, k * 3, 0.5 + k]], dtype="<f4").tobytes()
            yield infer_request(pb, "id_fp32", [("INPUT0", "FP32", [1, 4], raw)], rid=str(k))

    seen = {}
    for resp in stub.ModelStreamInfer(requests_gen(), timeout=120):
        assert resp.error_message == "", resp.error_message
        ir = resp.infer_response
        assert ir.parameters["triton_final_response"].bool_param is True
        k = int(ir.id)
        assert k not in seen
        seen[k] = ir.raw_output_contents[0]
    assert len(seen) == N
    for k in range(N):
        assert seen[k] == np.array([[k, -k, k * 3, 0.5 + k]], dtype="<f4").tobytes(), k


def test_stream_client_reads_late(stub, pb):
    """The client sends 600 requests of 64 KiB before reading anything: the
    server stops reading while its window is full and resumes as the client
    reads; every response arrives, right and in full."""
    N = 600

    def requests_gen():
        for k in range(N):
            raw = np.full((1, 16384), k, dtype="<f4").tobytes()
            yield infer_request(pb, "dt_fp32", [("INPUT0", "FP32", [1, 16384], raw)], rid=str(k))

    it = stub.ModelStreamInfer(requests_gen(), timeout=120)
    time.sleep(1.0)
    seen = set()
    for resp in it:
        assert resp.error_message == ""
        k = int(resp.infer_response.id)
        assert resp.infer_response.raw_output_contents[0] == \
            np.full((1, 16384), k, dtype="<f4").tobytes()
        seen.add(k)
    assert seen == set(range(N))


def test_stream_errors_in_band(stub, pb):
    good = good_fp32(pb)
    bad_model = good_fp32(pb)
    bad_model.model_name = "no_such_model"
    bad_size = infer_request(pb, "id_fp32", [("INPUT0", "FP32", [1, 4], b"\0" * 3)])
    seq = []
    for k, req in enumerate([good, bad_model, good, bad_size, good]):
        r = pb.svc.ModelInferRequest()
        r.CopyFrom(req)
        r.id = "s%d" % k
        seq.append(r)
    out = {}
    for resp in stub.ModelStreamInfer(iter(seq), timeout=TIMEOUT):
        out[resp.infer_response.id] = resp
    assert set(out) == {"s0", "s1", "s2", "s3", "s4"}
    for k in ("s0", "s2", "s4"):
        assert out[k].error_message == "" and len(out[k].infer_response.raw_output_contents) == 1
    assert "no_such_model" in out["s1"].error_message
    assert "INPUT0" in out["s3"].error_message


def test_stream_status_errors_with_header(stub, pb):
    bad = good_fp32(pb)
    bad.model_name = "no_such_model"
    stream = stub.ModelStreamInfer(iter([good_fp32(pb), bad, good_fp32(pb)]), timeout=TIMEOUT,
                                   metadata=(("triton_grpc_error", "true"),))
    with pytest.raises(grpc.RpcError) as info:
        for resp in stream:
            assert resp.error_message == ""
    assert info.value.code() == grpc.StatusCode.NOT_FOUND
    assert "no_such_model" in info.value.details()


def test_stream_undecodable_message(channel):
    stream = channel.stream_stream(SVC + "ModelStreamInfer")
    out = list(stream(iter([b"\xff\xff"]), timeout=TIMEOUT))
    assert len(out) == 1  # an in-band error: field 1 (error_message) is set
    assert out[0][:1] == b"\x0a" and b"parse" in out[0]


def test_stream_empty(stub):
    assert list(stub.ModelStreamInfer(iter([]), timeout=TIMEOUT)) == []


# ---------------------------------------------------------------- other servers

def test_not_ready_server(ptserve_bin, model_repo, tmp_path, pb):
    s = launch(ptserve_bin, model_repo("broken"), tmp_path / "broken.log",
               "--exit-on-error=false", expect_ready=False)
    try:
        with grpc.insecure_channel(s.grpc_target) as ch:
            stub = pb.svc_grpc.GRPCInferenceServiceStub(ch)
            assert stub.ServerLive(pb.svc.ServerLiveRequest(), timeout=TIMEOUT).live
            assert not stub.ServerReady(pb.svc.ServerReadyRequest(), timeout=TIMEOUT).ready
            h = pb.health_grpc.HealthStub(ch).Check(pb.health.HealthCheckRequest(),
                                                    timeout=TIMEOUT)
            assert h.status == pb.health.HealthCheckResponse.NOT_SERVING
            assert stub.ModelReady(pb.svc.ModelReadyRequest(name="good"), timeout=TIMEOUT).ready
            # Known to the repository but not ready: ready=false, status OK.
            r = stub.ModelReady(pb.svc.ModelReadyRequest(name="unknown_backend"),
                                timeout=TIMEOUT)
            assert r.ready is False
    finally:
        assert_clean_exit(s)


def test_response_compression_flag(ptserve_bin, tmp_path, pb):
    s = launch(ptserve_bin, REPO, tmp_path / "compress.log",
               "--grpc-infer-response-compression-level", "high", "--grpc-infer-thread-count", "1")
    try:
        with grpc.insecure_channel(s.grpc_target) as ch:
            stub = pb.svc_grpc.GRPCInferenceServiceStub(ch)
            raw = np.zeros((1, 8192), dtype="<f4").tobytes()
            req = infer_request(pb, "dt_fp32", [("INPUT0", "FP32", [1, 8192], raw)])
            assert stub.ModelInfer(req, timeout=TIMEOUT).raw_output_contents[0] == raw
            out = list(stub.ModelStreamInfer(iter([req, req]), timeout=TIMEOUT))
            assert [o.infer_response.raw_output_contents[0] for o in out] == [raw, raw]
    finally:
        assert_clean_exit(s)


def test_allow_grpc_false(ptserve_bin, tmp_path, pb):
    s = launch(ptserve_bin, REPO, tmp_path / "nogrpc.log", "--allow-grpc=false")
    try:
        assert "GRPCInferenceService" not in s.log()
        with socket.socket() as sock:
            sock.settimeout(2)
            assert sock.connect_ex(("127.0.0.1", s.grpc_port)) != 0
    finally:
        assert_clean_exit(s)


def test_grpc_port_in_use(ptserve_bin, tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        port = sock.getsockname()[1]
        p = subprocess.run([ptserve_bin, "--model-repository", REPO, "--http-port", "0",
                            "--metrics-port", "0", "--grpc-address", "127.0.0.1",
                            "--grpc-port", str(port)],
                           capture_output=True, text=True, timeout=60)
    assert p.returncode != 0
    assert "127.0.0.1:%d" % port in p.stdout + p.stderr


@pytest.mark.parametrize("args,words", [
    (["--grpc-infer-response-compression-level", "max"], ["compression-level", "max"]),
    (["--grpc-port", "70000"], ["grpc-port"]),
    (["--grpc-infer-thread-count", "0"], ["grpc-infer-thread-count"]),
    (["--grpc-keepalive-time", "-5"], ["grpc-keepalive-time"]),
    (["--allow-grpc", "maybe"], ["allow-grpc"]),
    # gRPC core's transport is gone (issue 50): the flag that chose it too.
    (["--grpc-transport", "core"], ["grpc-transport"]),
])
def test_bad_grpc_flags(ptserve_bin, args, words):
    p = subprocess.run([ptserve_bin, "--model-repository", REPO] + args,
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 1
    assert any(w in p.stderr for w in words), p.stderr


def test_gzip_call_stream_and_unknown_method(ptserve_bin, tmp_path, pb):
    """The transport (nghttp2) says so in the log; a gzip-compressed unary
    call, a stream of three and an unknown method are answered as gRPC
    core's server answered them, and error messages come back as written."""
    s = launch(ptserve_bin, REPO, tmp_path / "transport.log")
    try:
        assert "gRPC: serving on nghttp2" in s.log(), s.log()[-2000:]
        with grpc.insecure_channel(s.grpc_target,
                                   compression=grpc.Compression.Gzip) as ch:
            stub = pb.svc_grpc.GRPCInferenceServiceStub(ch)
            values = np.arange(4096, dtype="<f4").reshape(1, 4096) * 0.5
            req = infer_request(pb, "dt_fp32", [("INPUT0", "FP32", [1, 4096], values.tobytes())],
                                rid="u")
            resp = stub.ModelInfer(req, timeout=TIMEOUT)
            assert resp.id == "u" and resp.raw_output_contents[0] == values.tobytes()
            reqs = []
            for k in range(3):
                r = good_fp32(pb)
                r.id = "s%d" % k
                reqs.append(r)
            out = list(stub.ModelStreamInfer(iter(reqs), timeout=TIMEOUT))
            assert sorted(o.infer_response.id for o in out) == ["s0", "s1", "s2"]
            assert all(o.error_message == "" and o.infer_response.raw_output_contents[0] ==
                       np.array([[1, 2, 3, 4]], dtype="<f4").tobytes() for o in out)
            with pytest.raises(grpc.RpcError) as e:
                ch.unary_unary("/inference.GRPCInferenceService/NoSuchMethod")(b"",
                                                                                timeout=TIMEOUT)
            assert e.value.code() == grpc.StatusCode.UNIMPLEMENTED
            assert "NoSuchMethod" in e.value.details()
            # grpc-message is percent-encoded on the wire: the client gets
            # the text back as the server wrote it, 100% and non-ASCII too
            bad = good_fp32(pb)
            bad.model_name = "m\u00f6del 100%"
            with pytest.raises(grpc.RpcError) as e:
                stub.ModelInfer(bad, timeout=TIMEOUT)
            assert e.value.code() == grpc.StatusCode.NOT_FOUND
            assert "m\u00f6del 100%" in e.value.details(), e.value.details()
    finally:
        assert_clean_exit(s)


def test_concurrent_and_cancelled_calls(ptserve_bin, tmp_path, pb):
    """Many clients at once, calls abandoned by their deadline, streams the
    client cancels mid-way: every completed call is right, and the server
    ends cleanly (no leak, no crash: the sanitizer builds run this too)."""
    import threading
    s = launch(ptserve_bin, REPO, tmp_path / "stress.log", "--grpc-infer-thread-count", "3")
    errors = []
    try:
        with grpc.insecure_channel(s.grpc_target) as ch:
            stub = pb.svc_grpc.GRPCInferenceServiceStub(ch)

            def worker(w):
                try:
                    for k in range(100):
                        raw = np.array([[w, k, w * k, -1]], dtype="<f4").tobytes()
                        req = infer_request(pb, "id_fp32", [("INPUT0", "FP32", [1, 4], raw)])
                        if k % 10 == 3:
                            try:  # abandoned: the reply may arrive after the deadline
                                stub.ModelInfer(req, timeout=0.0005)
                            except grpc.RpcError as e:
                                assert e.code() == grpc.StatusCode.DEADLINE_EXCEEDED
                            continue
                        assert stub.ModelInfer(req, timeout=TIMEOUT).raw_output_contents[0] == raw
                except Exception as e:  # noqa: BLE001 — reported below
                    errors.append(e)

            def canceller():
                try:
                    for _ in range(10):
                        it = stub.ModelStreamInfer(iter([good_fp32(pb)] * 50), timeout=TIMEOUT)
                        next(it)
                        it.cancel()
                except Exception as e:  # noqa: BLE001
                    errors.append(e)

            threads = [threading.Thread(target=worker, args=(w,)) for w in range(8)]
            threads.append(threading.Thread(target=canceller))
            for t in threads:
                t.start()
            for t in threads:
                t.join(120)
            assert not errors, errors
            assert stub.ServerLive(pb.svc.ServerLiveRequest(), timeout=TIMEOUT).live
    finally:
        assert_clean_exit(s)


def test_shutdown_with_an_open_stream(ptserve_bin, tmp_path, pb):
    """SIGTERM while a client keeps a stream open: the stream is ended by the
    server after its grace period and the server exits 0."""
    import threading
    s = launch(ptserve_bin, REPO, tmp_path / "open.log")
    release = threading.Event()

    def requests_gen():
        yield good_fp32(pb)
        release.wait(60)  # never half-closes on its own

    with grpc.insecure_channel(s.grpc_target) as ch:
        stub = pb.svc_grpc.GRPCInferenceServiceStub(ch)
        it = stub.ModelStreamInfer(requests_gen(), timeout=60)
        first = next(it)
        assert first.error_message == "" and first.infer_response.raw_output_contents
        s.proc.terminate()
        with pytest.raises(grpc.RpcError) as info:
            for _ in it:
                pass
        assert info.value.code() in (grpc.StatusCode.CANCELLED, grpc.StatusCode.UNAVAILABLE)
        release.set()
        rc = s.proc.wait(timeout=60)
    log = s.log()
    assert_no_sanitizer_report(log)
    assert rc == 0, log
