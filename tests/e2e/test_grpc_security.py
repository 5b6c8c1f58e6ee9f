"""--grpc-restricted-protocol, end to end.

Expected behaviour (tritonserver's gRPC frontend, stated in the issue and
docs/grpc-api.md): an rpc of a restricted group called without the metadata
key and value fails with status UNAVAILABLE and "This protocol is
restricted, expecting header 'triton-grpc-protocol-<key>'"; with them
(under tritonserver's name for them, "triton-grpc-protocol-<key>", or the
bare key as HTTP takes it) it is answered as usual;
other groups and the HTTP endpoints are unaffected. The group names and the
flag syntax are those of --http-restricted-api (protocol-facts §1.1).
"""
import subprocess

import numpy as np
import pytest
import requests

from conftest import assert_clean_exit, need_module

grpc = need_module("grpc")

from test_grpc import REPO, TIMEOUT, expect_code, infer_request, launch, pb  # noqa: E402,F401

RESTRICT = ["--grpc-restricted-protocol=inference,model-config:infer-key=secret",
            "--grpc-restricted-protocol", "health:health-key=h:v"]
INFER_MD = (("infer-key", "secret"),)
HEALTH_MD = (("health-key", "h:v"),)


def refused(fn, key):
    err = expect_code(fn, grpc.StatusCode.UNAVAILABLE)
    assert err.details() == \
        "This protocol is restricted, expecting header 'triton-grpc-protocol-%s'" % key


@pytest.fixture(scope="module")
def restricted(ptserve_bin, tmp_path_factory):
    log = tmp_path_factory.mktemp("grpc_restrict") / "server.log"
    s = launch(ptserve_bin, REPO, log, *RESTRICT)
    ch = grpc.insecure_channel(s.grpc_target)
    grpc.channel_ready_future(ch).result(timeout=TIMEOUT)
    yield s, ch
    ch.close()
    assert_clean_exit(s)


def fp32_request(pb):
    raw = np.array([[1.5, -2.0, 3.25, 0.0]], dtype="<f4").tobytes()
    return infer_request(pb, "dt_fp32", [("INPUT0", "FP32", [1, 4], raw)]), raw


def test_infer_needs_the_key(restricted, pb):
    _, ch = restricted
    stub = pb.svc_grpc.GRPCInferenceServiceStub(ch)
    req, raw = fp32_request(pb)
    refused(lambda: stub.ModelInfer(req, timeout=TIMEOUT), "infer-key")
    refused(lambda: stub.ModelInfer(req, timeout=TIMEOUT, metadata=(("infer-key", "wrong"),)),
            "infer-key")
    refused(lambda: stub.ModelInfer(req, timeout=TIMEOUT, metadata=HEALTH_MD), "infer-key")
    resp = stub.ModelInfer(req, timeout=TIMEOUT, metadata=INFER_MD)
    assert resp.raw_output_contents[0] == raw
    # tritonserver's form of the header, as Triton's own QA sends it
    refused(lambda: stub.ModelInfer(req, timeout=TIMEOUT,
                                    metadata=(("triton-grpc-protocol-infer-key", "wrong"),)),
            "infer-key")
    resp = stub.ModelInfer(req, timeout=TIMEOUT,
                           metadata=(("triton-grpc-protocol-infer-key", "secret"),))
    assert resp.raw_output_contents[0] == raw


def test_stream_infer_needs_the_key(restricted, pb):
    _, ch = restricted
    stub = pb.svc_grpc.GRPCInferenceServiceStub(ch)
    req, raw = fp32_request(pb)
    refused(lambda: list(stub.ModelStreamInfer(iter([req, req]), timeout=TIMEOUT)), "infer-key")
    out = list(stub.ModelStreamInfer(iter([req, req]), timeout=TIMEOUT, metadata=INFER_MD))
    assert [o.error_message for o in out] == ["", ""]
    assert [o.infer_response.raw_output_contents[0] for o in out] == [raw, raw]


def test_model_config_needs_the_key(restricted, pb):
    _, ch = restricted
    stub = pb.svc_grpc.GRPCInferenceServiceStub(ch)
    req = pb.svc.ModelConfigRequest(name="dt_fp32")
    refused(lambda: stub.ModelConfig(req, timeout=TIMEOUT), "infer-key")
    assert stub.ModelConfig(req, timeout=TIMEOUT, metadata=INFER_MD).config.name == "dt_fp32"


def test_health_group_covers_live_ready_and_grpc_health(restricted, pb):
    _, ch = restricted
    stub = pb.svc_grpc.GRPCInferenceServiceStub(ch)
    health = pb.health_grpc.HealthStub(ch)
    calls = [
        lambda md: stub.ServerLive(pb.svc.ServerLiveRequest(), timeout=TIMEOUT, metadata=md).live,
        lambda md: stub.ServerReady(pb.svc.ServerReadyRequest(), timeout=TIMEOUT,
                                    metadata=md).ready,
        lambda md: stub.ModelReady(pb.svc.ModelReadyRequest(name="dt_fp32"), timeout=TIMEOUT,
                                   metadata=md).ready,
        lambda md: health.Check(pb.health.HealthCheckRequest(), timeout=TIMEOUT,
                                metadata=md).status == pb.health.HealthCheckResponse.SERVING,
    ]
    for call in calls:
        refused(lambda: call(()), "health-key")
        refused(lambda: call(INFER_MD), "health-key")
        assert call(HEALTH_MD) is True


def test_open_groups_need_nothing(restricted, pb):
    _, ch = restricted
    stub = pb.svc_grpc.GRPCInferenceServiceStub(ch)
    md = stub.ServerMetadata(pb.svc.ServerMetadataRequest(), timeout=TIMEOUT)
    assert "model_repository" in md.extensions
    assert stub.ModelMetadata(pb.svc.ModelMetadataRequest(name="dt_fp32"),
                              timeout=TIMEOUT).name == "dt_fp32"
    names = [m.name for m in stub.RepositoryIndex(pb.svc.RepositoryIndexRequest(),
                                                    timeout=TIMEOUT).models]
    assert "dt_fp32" in names
    stub.ModelStatistics(pb.svc.ModelStatisticsRequest(name="dt_fp32"), timeout=TIMEOUT)
    stub.LogSettings(pb.svc.LogSettingsRequest(), timeout=TIMEOUT)
    # Shared memory is not restricted: the status answers (no region).
    st = stub.SystemSharedMemoryStatus(pb.svc.SystemSharedMemoryStatusRequest(), timeout=TIMEOUT)
    assert len(st.regions) == 0


def test_http_is_not_restricted_by_the_grpc_flag(restricted):
    s, _ = restricted
    base = "http://127.0.0.1:%d" % s.port
    assert requests.get(base + "/v2/health/live", timeout=TIMEOUT).status_code == 200
    body = {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 4],
                        "data": [1, 2, 3, 4]}]}
    r = requests.post(base + "/v2/models/dt_fp32/infer", json=body, timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    assert r.json()["outputs"][0]["data"] == [1, 2, 3, 4]


@pytest.mark.parametrize("values,why", [
    (["inference"], "expected <api>[,<api>...]:<header>=<value>"),
    (["inference:infer-key"], "expected <api>[,<api>...]:<header>=<value>"),
    (["inference:=v"], "expected <api>[,<api>...]:<header>=<value>"),
    (["inference:k="], "expected <api>[,<api>...]:<header>=<value>"),
    (["bogus:k=v"], "unknown API 'bogus'"),
    (["health,health:k=v"], "API 'health' is already restricted"),
    (["health:a=1", "metadata,health:b=2"], "API 'health' is already restricted"),
])
def test_bad_flag_values_refused_at_start(ptserve_bin, values, why):
    args = []
    for v in values:
        args += ["--grpc-restricted-protocol", v]
    p = subprocess.run([ptserve_bin, "--model-repository", REPO, "--http-port", "0",
                        "--grpc-port", "0", "--metrics-port", "0"] + args,
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 1, p.stderr
    assert "--grpc-restricted-protocol" in p.stderr, p.stderr
    assert why in p.stderr, p.stderr
