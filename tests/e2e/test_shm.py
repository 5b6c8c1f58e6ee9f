"""The system shared-memory extension, end to end (issue 12 part 1), and
the CUDA one as far as a build without CUDA goes (part 2).

Everything is driven through NVIDIA's own clients, unchanged:
tritonclient.utils.shared_memory makes the POSIX shared-memory objects,
tritonclient.http / tritonclient.grpc register them and infer through
them. Raw requests check exact status codes and messages where the client
would hide them.

Expected values are independent of ptserve: the identity models echo their
input (so the output region must hold exactly the bytes the test wrote to
the input region), and add_sub (TorchScript) is checked against numpy's
a + b and a - b. Requests are held in the queue with the test hook
PTSERVE_DELAY_SCHEDULER and the pending gauge of /metrics, never with
sleeps."""
import base64
import json
import os
import re
import subprocess

import numpy as np
import pytest
import requests

from conftest import assert_clean_exit, free_port, launch_server, module_server, need_module
from sched_util import DELAY_ENV, batch_sizes, identity_model, model_stats, wait_pending

grpcclient = need_module("tritonclient.grpc")
httpclient = need_module("tritonclient.http")
tu = need_module("tritonclient.utils")
shm = need_module("tritonclient.utils.shared_memory")
InferenceServerException = tu.InferenceServerException

TIMEOUT = 30
PREFIX = "/ptstest_%d_" % os.getpid()


def launch(bin_path, repo, log_path, *args, **kw):
    return launch_server(bin_path, repo, log_path, "--allow-client-shm=true", *args,
                         metrics_port=0, grpc_port=free_port(), **kw)


server = module_server(launch, "shm")


@pytest.fixture
def regions():
    """make(name, byte_size) -> a tritonclient shm handle whose key is unique
    to this test process; every handle is destroyed (and unlinked) after the
    test."""
    made = []

    def make(name, byte_size):
        h = shm.create_shared_memory_region(name, PREFIX + name, byte_size)
        made.append(h)
        return h

    yield make
    for h in made:
        shm.destroy_shared_memory_region(h)


class Client:
    """The same calls over HTTP and gRPC (tritonclient's two modules)."""

    def __init__(self, server, protocol):
        self.protocol = protocol
        self.mod = httpclient if protocol == "http" else grpcclient
        if protocol == "http":
            self.c = httpclient.InferenceServerClient(server.url[len("http://"):])
        else:
            self.c = grpcclient.InferenceServerClient(server.grpc_target)

    def status(self, name=""):
        """[{name, key, offset, byte_size}] sorted by name, for both protocols."""
        st = self.c.get_system_shared_memory_status(region_name=name)
        if self.protocol == "http":
            return sorted(st, key=lambda r: r["name"])
        return sorted(({"name": r.name, "key": r.key, "offset": r.offset,
                        "byte_size": r.byte_size} for r in st.regions.values()),
                      key=lambda r: r["name"])

    def infer(self, model, inputs, outputs):
        return self.c.infer(model, inputs, outputs=outputs)

    def input(self, name, shape, dtype):
        return self.mod.InferInput(name, shape, dtype)

    def output(self, name):
        if self.protocol == "http":
            return httpclient.InferRequestedOutput(name, binary_data=True)
        return grpcclient.InferRequestedOutput(name)


@pytest.fixture(params=["http", "grpc"])
def client(request, server):
    c = Client(server, request.param)
    yield c
    c.c.unregister_system_shared_memory()
    c.c.close()


def status_code(ex):
    """'400' over HTTP, 'StatusCode.INVALID_ARGUMENT' over gRPC."""
    return str(ex.status())


WANT_CODE = {
    "http": {"invalid": "400", "not_found": "404", "unsupported": "501"},
    "grpc": {"invalid": "StatusCode.INVALID_ARGUMENT", "not_found": "StatusCode.NOT_FOUND",
             "unsupported": "StatusCode.UNIMPLEMENTED",
             "exists": "StatusCode.ALREADY_EXISTS"},
}


def expect_error(client, kind, words, fn, *args, **kw):
    with pytest.raises(InferenceServerException) as e:
        fn(*args, **kw)
    want = WANT_CODE[client.protocol].get(kind, "400")
    assert status_code(e.value) == want, (status_code(e.value), e.value.message())
    for w in words:
        assert w in e.value.message(), e.value.message()
    return e.value


# ------------------------------------------------------------ registration

def test_extensions_advertised(server, ptserve_bin):
    md = requests.get(server.url + "/v2", timeout=TIMEOUT).json()
    assert "system_shared_memory" in md["extensions"]
    # cuda_shared_memory exactly when the binary links the CUDA runtime
    ldd = subprocess.run(["ldd", ptserve_bin], capture_output=True, text=True).stdout
    assert ("cuda_shared_memory" in md["extensions"]) == ("libcudart" in ldd or
                                                          "libtorch_cuda" in ldd), ldd


def test_register_status_unregister(client, regions):
    regions("a", 64)
    regions("b", 8192)
    client.c.register_system_shared_memory("b", PREFIX + "b", 100, offset=4000)
    client.c.register_system_shared_memory("a", PREFIX + "a", 64)
    assert client.status() == [
        {"name": "a", "key": PREFIX + "a", "offset": 0, "byte_size": 64},
        {"name": "b", "key": PREFIX + "b", "offset": 4000, "byte_size": 100},
    ]
    assert client.status("b") == [{"name": "b", "key": PREFIX + "b", "offset": 4000,
                                   "byte_size": 100}]
    client.c.unregister_system_shared_memory("a")
    assert [r["name"] for r in client.status()] == ["b"]
    # unregistering a name that is not registered is a no-op, as in Triton
    client.c.unregister_system_shared_memory("a")
    client.c.unregister_system_shared_memory()
    assert client.status() == []
    # the name can be registered again
    client.c.register_system_shared_memory("a", PREFIX + "a", 64)
    assert [r["name"] for r in client.status()] == ["a"]


def test_status_of_unknown_region(client):
    expect_error(client, "not_found", ["Unable to find system shared memory region: 'nope'"],
                 client.c.get_system_shared_memory_status, region_name="nope")


@pytest.mark.parametrize("case", [
    "missing_key", "past_end", "offset_past_end", "zero_size", "double", "bad_key",
    "reserved_prefix",
])
def test_bad_registrations(client, regions, case):
    regions("r", 128)
    key = PREFIX + "r"
    if case == "missing_key":
        expect_error(client, "invalid", ["failed to register shared memory region 'x'",
                                         "unable to open shared memory object",
                                         "No such file or directory"],
                     client.c.register_system_shared_memory, "x", PREFIX + "nothing", 8)
    elif case == "past_end":
        expect_error(client, "invalid", ["'x'", "past the end", "(128 bytes)"],
                     client.c.register_system_shared_memory, "x", key, 129)
    elif case == "offset_past_end":
        expect_error(client, "invalid", ["offset 100 + byte_size 29 is past the end"],
                     client.c.register_system_shared_memory, "x", key, 29, offset=100)
    elif case == "zero_size":
        expect_error(client, "invalid", ["byte_size must be greater than 0"],
                     client.c.register_system_shared_memory, "x", key, 0)
    elif case == "double":
        client.c.register_system_shared_memory("x", key, 8)
        expect_error(client, "exists", ["shared memory region 'x' already in manager"],
                     client.c.register_system_shared_memory, "x", key, 16)
        assert client.status("x")[0]["byte_size"] == 8  # the first one stands
    elif case == "bad_key":
        expect_error(client, "invalid", ["invalid key"],
                     client.c.register_system_shared_memory, "x", PREFIX + "a/b", 8)
    elif case == "reserved_prefix":
        # Triton's Python backend's prefix (qa/L0_shared_memory
        # test_register_reserved_names matches these words).
        key = "triton_python_backend_shm_region__my_test_shm_key"
        expect_error(client, "invalid", [
            "cannot register shared memory region 'x' with key '%s' as the key contains the "
            "reserved prefix 'triton_python_backend_shm_region_'" % key],
            client.c.register_system_shared_memory, "x", key, 10000)
    assert all(r["name"] != "x" or case == "double" for r in client.status())


@pytest.mark.parametrize("offset,byte_size", [(0, 129), (1, 128), (128, 1), (129, 0)])
def test_out_of_bounds_registration_in_tritons_words(client, regions, offset, byte_size):
    """qa/L0_shared_memory test_register_out_of_bound: a 128-byte object
    registered past its end, or with nothing in it, is refused with
    'failed to register shared memory region.*invalid args'."""
    regions("r", 128)
    e = expect_error(client, "invalid", [], client.c.register_system_shared_memory, "x",
                     PREFIX + "r", byte_size, offset=offset)
    assert re.search("failed to register shared memory region.*invalid args", e.message()), \
        e.message()


@pytest.mark.parametrize("body,words", [
    ("", ["must be a JSON object", "empty body"]),
    ("[1]", ["must be a JSON object", "an array"]),
    ("{", ["failed to parse"]),
    ('{"offset": 0, "byte_size": 8}', ["has no 'key'"]),
    ('{"key": 7, "byte_size": 8}', ["'key' must be a string"]),
    ('{"key": "/k"}', ["has no 'byte_size'"]),
    ('{"key": "/k", "byte_size": -1}', ["'byte_size' must be a non-negative integer"]),
    ('{"key": "/k", "byte_size": 8, "offset": "0"}', ["'offset' must be a non-negative integer"]),
])
def test_register_json_errors(server, body, words):
    r = requests.post(server.url + "/v2/systemsharedmemory/region/j/register", data=body,
                      timeout=TIMEOUT)
    assert r.status_code == 400, r.text
    for w in words:
        assert w in r.json()["error"], r.text


def test_shm_paths_and_methods(server):
    r = requests.get(server.url + "/v2/systemsharedmemory/region/j/register", timeout=TIMEOUT)
    assert r.status_code == 405
    r = requests.post(server.url + "/v2/systemsharedmemory/status", timeout=TIMEOUT)
    assert r.status_code == 405
    r = requests.post(server.url + "/v2/systemsharedmemory/register", timeout=TIMEOUT)
    assert r.status_code == 404
    r = requests.get(server.url + "/v2/systemsharedmemory/status", timeout=TIMEOUT)
    assert r.status_code == 200 and r.json() == []


# -------------------------------------------------------------- inference

def write(handle, arr, offset=0):
    shm.set_shared_memory_region(handle, [arr], offset=offset)


def read(handle, dtype, shape, offset=0):
    return shm.get_contents_as_numpy(handle, dtype, shape, offset=offset)


def test_infer_fp32_through_shm(client, regions):
    """Input at an offset that is not page-aligned, output in its own region:
    the output region ends up with the input's values (identity)."""
    x = np.random.RandomState(1).uniform(-10, 10, (2, 4)).astype(np.float32)
    hin = regions("in", 4096 + 64)
    hout = regions("out", x.nbytes)
    write(hin, x, offset=4100)
    write(hout, np.zeros_like(x))
    client.c.register_system_shared_memory("in", PREFIX + "in", 4096 + 64)
    client.c.register_system_shared_memory("out", PREFIX + "out", x.nbytes)
    i = client.input("INPUT0", [2, 4], "FP32")
    i.set_shared_memory("in", x.nbytes, offset=4100)
    o = client.output("OUTPUT0")
    o.set_shared_memory("out", x.nbytes)
    r = client.infer("id_fp32", [i], [o])
    np.testing.assert_array_equal(read(hout, np.float32, [2, 4]), x)
    out = r.get_output("OUTPUT0")
    if client.protocol == "http":
        # §1.7: a shared-memory output has neither data nor binary_data_size
        assert out == {"name": "OUTPUT0", "datatype": "FP32", "shape": [2, 4]}
    else:
        assert out.datatype == "FP32" and list(out.shape) == [2, 4]
        assert r.get_response().raw_output_contents == [b""]


def test_output_region_at_offset_and_body_input(client, regions):
    """Input in the request body, output at an offset inside a shared region
    that also holds other bytes: only the output's place changes."""
    x = np.arange(4, dtype=np.float32).reshape(1, 4) + 0.5
    h = regions("both", 64)
    write(h, np.full(16, 7, dtype=np.float32))
    client.c.register_system_shared_memory("both", PREFIX + "both", 64)
    i = client.input("INPUT0", [1, 4], "FP32")
    i.set_data_from_numpy(x)
    o = client.output("OUTPUT0")
    o.set_shared_memory("both", 16, offset=32)
    client.infer("id_fp32", [i], [o])
    got = read(h, np.float32, [16])
    np.testing.assert_array_equal(got[8:12], x.ravel())
    np.testing.assert_array_equal(np.delete(got, range(8, 12)), np.full(12, 7, np.float32))


def test_bytes_and_int32_through_shm(client, regions):
    """id_multi: INT32 [3] and BYTES [-1], both inputs and both outputs in
    shared memory (BYTES in its serialized, length-prefixed form)."""
    a = np.array([[1, -2, 3]], dtype=np.int32)
    s = np.array([[b"shared", b"", b"memory\x00bytes"]], dtype=np.object_)
    serialized = tu.serialize_byte_tensor(s)  # one object: the length-prefixed bytes
    sb = serialized.item()
    hin = regions("min", 1024)
    hout = regions("mout", 1024)
    write(hin, a)
    write(hin, serialized, offset=64)
    client.c.register_system_shared_memory("min", PREFIX + "min", 1024)
    client.c.register_system_shared_memory("mout", PREFIX + "mout", 1024)
    i0 = client.input("INPUT0", [1, 3], "INT32")
    i0.set_shared_memory("min", a.nbytes)
    i1 = client.input("INPUT1", [1, 3], "BYTES")
    i1.set_shared_memory("min", len(sb), offset=64)
    o0 = client.output("OUTPUT0")
    o0.set_shared_memory("mout", a.nbytes)
    o1 = client.output("OUTPUT1")
    o1.set_shared_memory("mout", 512, offset=256)
    client.infer("id_multi", [i0, i1], [o0, o1])
    np.testing.assert_array_equal(read(hout, np.int32, [1, 3]), a)
    got = read(hout, np.object_, [1, 3], offset=256)
    assert [bytes(v) for v in got.ravel()] == [b"shared", b"", b"memory\x00bytes"]


def test_torch_add_sub_through_shm(start_server, torch_models, regions):
    """The classic Triton shm example: add_sub with both inputs and both
    outputs in shared memory, over HTTP and gRPC, against numpy."""
    server = start_server(torch_models, "--allow-client-shm=true", "--exit-on-error=false",
                          expect_ready=False)
    rs = np.random.RandomState(3)
    a = rs.uniform(-5, 5, (2, 4)).astype(np.float32)
    b = rs.uniform(-5, 5, (2, 4)).astype(np.float32)
    hin = regions("ab", 2 * a.nbytes)
    hout = regions("sd", 2 * a.nbytes)
    write(hin, a)
    write(hin, b, offset=a.nbytes)
    for protocol in ("http", "grpc"):
        c = Client(server, protocol)
        write(hout, np.zeros((4, 4), np.float32))
        c.c.register_system_shared_memory("ab", PREFIX + "ab", 2 * a.nbytes)
        c.c.register_system_shared_memory("sd", PREFIX + "sd", 2 * a.nbytes)
        i0 = c.input("INPUT0", [2, 4], "FP32")
        i0.set_shared_memory("ab", a.nbytes)
        i1 = c.input("INPUT1", [2, 4], "FP32")
        i1.set_shared_memory("ab", b.nbytes, offset=a.nbytes)
        o0 = c.output("OUTPUT0")
        o0.set_shared_memory("sd", a.nbytes)
        o1 = c.output("OUTPUT1")
        o1.set_shared_memory("sd", a.nbytes, offset=a.nbytes)
        c.infer("add_sub_fp32", [i0, i1], [o0, o1])
        np.testing.assert_allclose(read(hout, np.float32, [2, 4]), a + b, rtol=1e-6)
        np.testing.assert_allclose(read(hout, np.float32, [2, 4], offset=a.nbytes), a - b,
                                   rtol=1e-6)
        c.c.unregister_system_shared_memory()
        c.c.close()
    assert_clean_exit(server)


@pytest.mark.parametrize("case", [
    "unknown_region", "offset_past_end", "size_past_end", "size_vs_shape", "output_too_small",
])
def test_bad_shm_infer(client, regions, case):
    x = np.ones((1, 4), np.float32)
    regions("r", 32)
    client.c.register_system_shared_memory("r", PREFIX + "r", 32)
    i = client.input("INPUT0", [1, 4], "FP32")
    o = None
    if case == "unknown_region":
        i.set_shared_memory("nope", 16)
        kind, words = "not_found", ["input 'INPUT0'", "Unable to find shared memory region: 'nope'"]
    elif case == "offset_past_end":
        i.set_shared_memory("r", 16, offset=32)
        kind, words = "invalid", ["input 'INPUT0'", "Invalid offset for shared memory region: 'r'"]
    elif case == "size_past_end":
        i.set_shared_memory("r", 16, offset=24)
        kind, words = "invalid", ["Invalid offset + byte size for shared memory region: 'r'"]
    elif case == "size_vs_shape":
        i.set_shared_memory("r", 12)
        kind, words = "invalid", ["input byte size mismatch for input 'INPUT0'", "Expected 16, "
                                  "got 12"]
    else:
        i.set_data_from_numpy(x)
        o = client.output("OUTPUT0")
        o.set_shared_memory("r", 8)
        kind, words = "invalid", ["output 'OUTPUT0' (8 bytes) should be at least 16 bytes"]
    expect_error(client, kind, words, client.infer, "id_fp32", [i], [o] if o else None)
    # the server goes on serving
    i = client.input("INPUT0", [1, 4], "FP32")
    i.set_data_from_numpy(x)
    r = client.infer("id_fp32", [i], [client.output("OUTPUT0")])
    np.testing.assert_array_equal(r.as_numpy("OUTPUT0"), x)


@pytest.mark.parametrize("params,words", [
    ({"shared_memory_region": "r"}, ["'shared_memory_byte_size' must be given"]),
    ({"shared_memory_byte_size": 16}, ["without 'shared_memory_region'"]),
    ({"shared_memory_region": "", "shared_memory_byte_size": 16}, ["non-empty string"]),
    ({"shared_memory_region": "r", "shared_memory_byte_size": 16, "shared_memory_offset": -1},
     ["'shared_memory_offset' must be a non-negative integer"]),
])
def test_bad_shm_parameters_http(server, params, words):
    body = {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 4],
                        "parameters": params}]}
    r = requests.post(server.url + "/v2/models/id_fp32/infer", data=json.dumps(body),
                      timeout=TIMEOUT)
    assert r.status_code == 400, r.text
    for w in words:
        assert w in r.json()["error"]


@pytest.mark.parametrize("offset,byte_size,words", [
    # qa/L0_shared_memory test_infer_offset_out_of_bound and
    # test_infer_integer_overflow (HTTP; gRPC's int64 can not carry them).
    (2 ** 64 - 32, 64, "Invalid offset for shared memory region: 'out': offset "
                       "18446744073709551584 is not inside its 64 bytes"),
    (32, 2 ** 64 - 32, "Integer overflow detected: byte_size 18446744073709551584 + offset 32"),
])
def test_uint64_output_offsets_http(server, regions, offset, byte_size, words):
    regions("out", 64)
    r = requests.post(server.url + "/v2/systemsharedmemory/region/out/register",
                      data=json.dumps({"key": PREFIX + "out", "byte_size": 64}), timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    body = {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 4],
                        "data": [1, 2, 3, 4]}],
            "outputs": [{"name": "OUTPUT0", "parameters": {
                "shared_memory_region": "out", "shared_memory_byte_size": byte_size,
                "shared_memory_offset": offset}}]}
    r = requests.post(server.url + "/v2/models/id_fp32/infer", data=json.dumps(body),
                      timeout=TIMEOUT)
    assert r.status_code == 400, r.text
    assert words in r.json()["error"], r.json()
    assert "output 'OUTPUT0'" in r.json()["error"], r.json()
    requests.post(server.url + "/v2/systemsharedmemory/unregister", timeout=TIMEOUT)


def test_binary_data_with_shm_output_http(server, regions):
    regions("r", 16)
    requests.post(server.url + "/v2/systemsharedmemory/region/bd/register",
                  data=json.dumps({"key": PREFIX + "r", "byte_size": 16}), timeout=TIMEOUT)
    body = {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 4],
                        "data": [1, 2, 3, 4]}],
            "outputs": [{"name": "OUTPUT0", "parameters": {
                "binary_data": True, "shared_memory_region": "bd",
                "shared_memory_byte_size": 16}}]}
    r = requests.post(server.url + "/v2/models/id_fp32/infer", data=json.dumps(body),
                      timeout=TIMEOUT)
    assert r.status_code == 400
    assert "can not set both 'binary_data' (true) and 'shared_memory_region'" in r.json()["error"]
    requests.post(server.url + "/v2/systemsharedmemory/unregister", timeout=TIMEOUT)


def test_shrunk_object_is_refused_not_a_crash(client, regions):
    """A client that truncates its object after registering it: the server
    re-checks the size on use instead of touching pages that are gone."""
    h = regions("s", 8192)
    client.c.register_system_shared_memory("s", PREFIX + "s", 8192)
    fd = os.open("/dev/shm/" + PREFIX[1:] + "s", os.O_RDWR)
    try:
        os.ftruncate(fd, 16)
    finally:
        os.close(fd)
    i = client.input("INPUT0", [1, 4], "FP32")
    i.set_shared_memory("s", 16, offset=4096)
    expect_error(client, "invalid", ["'s'", "shrank to 16 bytes"], client.infer, "id_fp32", [i],
                 None)
    assert h is not None


# ---------------------------------------------- in use, batching, disabled

def test_unregister_while_in_use(start_server, tmp_path, regions):
    """A request queued with its input and output in a region holds the
    region: unregistering it succeeds (tritonserver since 25.x), yet the
    region stays listed and usable until the request is answered, which
    still reads and writes it; then it is gone."""
    identity_model(tmp_path, "m")
    server = start_server(tmp_path, "--allow-client-shm=true", env={DELAY_ENV: "2"})
    c = httpclient.InferenceServerClient(server.url[len("http://"):], concurrency=4)
    x = np.arange(4, dtype=np.float32).reshape(1, 4) - 1.5
    h = regions("busy", 64)
    regions("idle", 64)
    write(h, x)
    c.register_system_shared_memory("busy", PREFIX + "busy", 64)
    c.register_system_shared_memory("idle", PREFIX + "idle", 64)
    i = httpclient.InferInput("INPUT0", [1, 4], "FP32")
    i.set_shared_memory("busy", 16)
    o = httpclient.InferRequestedOutput("OUTPUT0", binary_data=True)
    o.set_shared_memory("busy", 16, offset=32)
    held = c.async_infer("m", [i], outputs=[o])
    wait_pending(server, "m", 1)
    c.unregister_system_shared_memory("busy")
    # unregister-all frees the idle one at once; the busy one waits
    c.unregister_system_shared_memory()
    assert [r["name"] for r in c.get_system_shared_memory_status()] == ["busy"]
    # a second request releases the hold; both are answered
    j = httpclient.InferInput("INPUT0", [1, 4], "FP32")
    j.set_data_from_numpy(x * 2)
    r2 = c.infer("m", [j])
    np.testing.assert_array_equal(r2.as_numpy("OUTPUT0"), x * 2)
    held.get_result()
    np.testing.assert_array_equal(read(h, np.float32, [1, 4], offset=32), x)
    # its request answered, the region is gone: status and new requests say so
    assert c.get_system_shared_memory_status() == []
    with pytest.raises(InferenceServerException) as e:
        c.infer("m", [i], outputs=[o])
    assert "Unable to find shared memory region: 'busy'" in e.value.message()
    # and the name can be registered again
    c.register_system_shared_memory("busy", PREFIX + "busy", 64)
    c.infer("m", [i], outputs=[o])
    np.testing.assert_array_equal(read(h, np.float32, [1, 4], offset=32), x)
    c.close()
    assert_clean_exit(server)


RACE_ROUNDS = 50


def test_unregister_right_after_the_answer(client, regions):
    """A region is free again as soon as its request is answered: the
    request lets go of it before the answer leaves, so a client that
    unregisters the moment it has its answer is never told that requests
    use it. Repeated (the answer and the request's clean-up used to race),
    with the output in shared memory, in the body (identity echoes the
    region's bytes: the response must not keep the region either), and
    after an error answer."""
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    hin = regions("rin", x.nbytes)
    hout = regions("rout", x.nbytes)
    for k in range(RACE_ROUNDS):
        y = x + k
        write(hin, y)
        client.c.register_system_shared_memory("rin", PREFIX + "rin", x.nbytes)
        client.c.register_system_shared_memory("rout", PREFIX + "rout", x.nbytes)
        i = client.input("INPUT0", [2, 4], "FP32")
        i.set_shared_memory("rin", x.nbytes)
        o = client.output("OUTPUT0")
        if k % 3 == 0:
            o.set_shared_memory("rout", x.nbytes)
        if k % 3 == 2:
            # too few bytes for the shape: refused after the region was resolved
            i.set_shared_memory("rin", x.nbytes - 4)
            with pytest.raises(InferenceServerException):
                client.infer("id_fp32", [i], [o])
        else:
            r = client.infer("id_fp32", [i], [o])
        client.c.unregister_system_shared_memory("rin")
        client.c.unregister_system_shared_memory("rout")
        assert client.status() == [], k
        if k % 3 == 0:
            np.testing.assert_array_equal(read(hout, np.float32, [2, 4]), y)
        elif k % 3 == 1:
            np.testing.assert_array_equal(r.as_numpy("OUTPUT0"), y)


def host_copy_bytes(server):
    text = requests.get(server.metrics_url, timeout=TIMEOUT).text
    return int(re.search(r"^ptserve_host_copy_bytes_total (\d+)$", text, re.M).group(1))


def test_host_copy_counter(start_server, tmp_path, regions):
    """ptserve_host_copy_bytes_total counts the tensor bytes the server
    copies with the CPU, worked out by hand for an identity model (one
    request, so nothing is gathered): the input used in place from a system
    region costs nothing; writing the output into a region is one copy of
    its bytes; echoing a region's input in the body is one copy too (the
    response must not hold the region); a batch of two gathers both."""
    identity_model(tmp_path, "m")
    # "b" waits (up to 30 s) until two requests are there: one batch of two
    identity_model(tmp_path, "b", extra="dynamic_batching { preferred_batch_size: [ 2 ] "
                   "max_queue_delay_microseconds: 30000000 }")
    server = start_server(tmp_path, "--allow-client-shm=true")
    c = httpclient.InferenceServerClient(server.url[len("http://"):], concurrency=4)
    x = np.arange(4, dtype=np.float32).reshape(1, 4)
    h = regions("cc", 64)
    write(h, x)
    c.register_system_shared_memory("cc", PREFIX + "cc", 64)

    def delta(fn):
        before = host_copy_bytes(server)
        fn()
        return host_copy_bytes(server) - before

    def body_only():
        i = httpclient.InferInput("INPUT0", [1, 4], "FP32")
        i.set_data_from_numpy(x, binary_data=True)
        c.infer("m", [i])

    def shm_in(out_in_shm):
        def run():
            i = httpclient.InferInput("INPUT0", [1, 4], "FP32")
            i.set_shared_memory("cc", x.nbytes)
            o = httpclient.InferRequestedOutput("OUTPUT0", binary_data=True)
            if out_in_shm:
                o.set_shared_memory("cc", x.nbytes, offset=32)
            r = c.infer("m", [i], outputs=[o])
            if not out_in_shm:
                np.testing.assert_array_equal(r.as_numpy("OUTPUT0"), x)
        return run

    def batch_of_two():
        i = httpclient.InferInput("INPUT0", [1, 4], "FP32")
        i.set_data_from_numpy(x, binary_data=True)
        pending = [c.async_infer("b", [i]) for _ in range(2)]
        for p in pending:
            np.testing.assert_array_equal(p.get_result().as_numpy("OUTPUT0"), x)

    assert delta(body_only) == 0
    assert delta(shm_in(True)) == x.nbytes
    np.testing.assert_array_equal(read(h, np.float32, [1, 4], offset=32), x)
    assert delta(shm_in(False)) == x.nbytes
    assert delta(batch_of_two) == 2 * x.nbytes
    assert batch_sizes(model_stats(server, "b")) == {2: 1}
    c.unregister_system_shared_memory()
    c.close()
    assert_clean_exit(server)


def test_batched_requests_each_use_their_own_regions(start_server, tmp_path, regions):
    """Three shm requests form one batch (held until all three are queued);
    each request's output lands in its own region."""
    identity_model(tmp_path, "b", extra="dynamic_batching { }")
    server = start_server(tmp_path, "--allow-client-shm=true", env={DELAY_ENV: "3"})
    c = httpclient.InferenceServerClient(server.url[len("http://"):], concurrency=3)
    xs = [np.full((1, 4), k + 1, np.float32) * [1, 2, 3, 4] for k in range(3)]
    outs = []
    pending = []
    for k, x in enumerate(xs):
        hin = regions("bin%d" % k, 16)
        outs.append(regions("bout%d" % k, 16))
        write(hin, x.astype(np.float32))
        c.register_system_shared_memory("bin%d" % k, PREFIX + "bin%d" % k, 16)
        c.register_system_shared_memory("bout%d" % k, PREFIX + "bout%d" % k, 16)
        i = httpclient.InferInput("INPUT0", [1, 4], "FP32")
        i.set_shared_memory("bin%d" % k, 16)
        o = httpclient.InferRequestedOutput("OUTPUT0", binary_data=True)
        o.set_shared_memory("bout%d" % k, 16)
        pending.append(c.async_infer("b", [i], outputs=[o]))
    for p in pending:
        p.get_result()
    for x, h in zip(xs, outs):
        np.testing.assert_array_equal(read(h, np.float32, [1, 4]), x)
    assert batch_sizes(model_stats(server, "b")) == {3: 1}
    c.unregister_system_shared_memory()
    c.close()
    assert_clean_exit(server)


def test_disabled_without_allow_client_shm(start_server, model_repo, regions):
    """Triton's default (26.04 on): without --allow-client-shm=true nothing
    can be registered or used, and the answer names the flag."""
    server = start_server(model_repo("identity"))
    regions("off", 16)
    for protocol in ("http", "grpc"):
        c = Client(server, protocol)
        expect_error(c, "unsupported", ["--allow-client-shm=true"],
                     c.c.register_system_shared_memory, "off", PREFIX + "off", 16)
        i = c.input("INPUT0", [1, 4], "FP32")
        i.set_shared_memory("off", 16)
        expect_error(c, "unsupported", ["--allow-client-shm=true"], c.infer, "id_fp32", [i], None)
        assert c.status() == []
        c.c.close()
    assert_clean_exit(server)


# ------------------------------------------------- CUDA without CUDA

def test_cuda_registration_of_a_bogus_handle(client):
    """Both clients take the handle base64-encoded, as get_raw_handle()
    gives it. Without CUDA in the build the registration is refused saying
    so (as Triton built without GPUs); with CUDA, 64 bytes that are no
    cudaIpcMemHandle_t are refused by CUDA. Either way: 400, nothing
    registered, and the server serves on."""
    raw = base64.b64encode(bytes(range(64)))
    words = (["cudaIpcOpenMemHandle"] if cuda_build_of(client)
             else ["CUDA is not available in this build"])
    expect_error(client, "invalid", ["failed to register CUDA shared memory region 'g'"] + words,
                 client.c.register_cuda_shared_memory, "g", raw, 0, 64)
    st = client.c.get_cuda_shared_memory_status()
    assert (st if client.protocol == "http" else list(st.regions)) == []
    client.c.unregister_cuda_shared_memory()


def cuda_build_of(client):
    md = client.c.get_server_metadata()
    ext = md["extensions"] if client.protocol == "http" else list(md.extensions)
    return "cuda_shared_memory" in ext


@pytest.mark.parametrize("body,words", [
    ('{"raw_handle": "abc", "device_id": 0, "byte_size": 8}', ["'raw_handle' must be an object"]),
    ('{"raw_handle": {"b64": "!!!!"}, "device_id": 0, "byte_size": 8}', ["is not valid base64"]),
    ('{"raw_handle": {"b64": "AAAA"}, "device_id": -1, "byte_size": 8}', ["'device_id'"]),
    ('{"raw_handle": {"b64": "AAAA"}, "device_id": 0}', ["has no 'byte_size'"]),
])
def test_cuda_register_json_errors(server, body, words):
    r = requests.post(server.url + "/v2/cudasharedmemory/region/g/register", data=body,
                      timeout=TIMEOUT)
    assert r.status_code == 400, r.text
    for w in words:
        assert w in r.json()["error"], r.text
