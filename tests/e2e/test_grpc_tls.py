"""gRPC over TLS and mutual TLS: tritonserver's --grpc-use-ssl,
--grpc-use-ssl-mutual, --grpc-server-cert, --grpc-server-key and
--grpc-root-cert, end to end with NVIDIA's tritonclient.grpc.

Expected behaviour (tritonserver's command-line parser and gRPC server,
docs/grpc-api.md "TLS"): --grpc-use-ssl serves gRPC over TLS with the server
certificate and key; --grpc-use-ssl-mutual turns TLS on and, when true,
requires a client certificate that --grpc-root-cert's roots signed. The
certificates are made here with the openssl command: a CA, a server
certificate for localhost and 127.0.0.1, client certificates the CA signed
(one of them expired) and a second CA with a client of its own.

Expected values never come from ptserve: the model is a TorchScript add_sub
written here, and its answers are checked against numpy's a + b and a - b;
refusals are the client's exceptions and the reasons the server logs.
"""
import os
import socket
import ssl
import subprocess
import threading
import time
import warnings

import numpy as np
import pytest

from conftest import (assert_clean_exit, assert_no_sanitizer_report, free_port, launch_server,
                      need_module, wait_for)

grpcclient = need_module("tritonclient.grpc")
from tritonclient.utils import InferenceServerException  # noqa: E402

TIMEOUT = 10

CONFIG = """name: "add_sub"
backend: "pytorch"
max_batch_size: 8
input [
  { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] },
  { name: "INPUT1" data_type: TYPE_FP32 dims: [ -1 ] }
]
output [
  { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] },
  { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ -1 ] }
]
instance_group [ { count: 1 kind: KIND_CPU } ]
"""

# `openssl ca`, for the expired certificate: `openssl x509` of OpenSSL 3.0
# can not set a validity in the past.
CA_CONFIG = """[ ca ]
default_ca = test_ca
[ test_ca ]
database = index.txt
new_certs_dir = .
serial = serial.txt
default_md = sha256
policy = anything
unique_subject = no
[ anything ]
commonName = supplied
"""


# ---------------------------------------------------------------- certificates

class Pki:
    """The test's certificates, each <name>.pem with its key <name>.key."""

    def __init__(self, root):
        self.root = str(root)

    def path(self, name):
        return os.path.join(self.root, name)

    def openssl(self, *args):
        run = subprocess.run(["openssl"] + list(args), cwd=self.root, capture_output=True,
                             text=True)
        assert run.returncode == 0, "openssl %s:\n%s" % (" ".join(args), run.stderr)

    def ca(self, name):
        self.openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                     "-nodes", "-keyout", name + ".key", "-out", name + ".pem", "-days", "2",
                     "-subj", "/CN=ptserve test " + name)

    def request(self, name):
        self.openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                     "-keyout", name + ".key", "-out", name + ".csr", "-subj", "/CN=" + name)

    def signed(self, name, ca, san=None):
        self.request(name)
        args = ["x509", "-req", "-in", name + ".csr", "-CA", ca + ".pem", "-CAkey", ca + ".key",
                "-CAcreateserial", "-out", name + ".pem", "-days", "2"]
        if san:
            with open(self.path(name + ".ext"), "w") as f:
                f.write("subjectAltName=%s\n" % san)
            args += ["-extfile", name + ".ext"]
        self.openssl(*args)

    def expired(self, name, ca):
        self.request(name)
        with open(self.path("ca.cnf"), "w") as f:
            f.write(CA_CONFIG)
        open(self.path("index.txt"), "w").close()
        with open(self.path("serial.txt"), "w") as f:
            f.write("1000\n")
        self.openssl("ca", "-batch", "-config", "ca.cnf", "-cert", ca + ".pem", "-keyfile",
                     ca + ".key", "-in", name + ".csr", "-out", name + ".pem", "-notext",
                     "-startdate", "20200101000000Z", "-enddate", "20200102000000Z")


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    if subprocess.run(["openssl", "version"], capture_output=True).returncode != 0:
        pytest.fail("the openssl command is missing: scripts/setup.sh installs it")
    p = Pki(tmp_path_factory.mktemp("pki"))
    p.ca("ca")
    p.ca("other_ca")
    p.signed("server", "ca", san="DNS:localhost,IP:127.0.0.1")
    p.signed("client", "ca")
    p.signed("stranger", "other_ca")
    p.expired("expired", "ca")
    with open(p.path("junk.pem"), "w") as f:
        f.write("not a certificate\n")
    return p


# ---------------------------------------------------------------- servers

@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    import torch

    class AddSub(torch.nn.Module):
        def forward(self, INPUT0, INPUT1):
            return INPUT0 + INPUT1, INPUT0 - INPUT1

    root = tmp_path_factory.mktemp("tls_repo")
    os.makedirs(root / "add_sub" / "1")
    (root / "add_sub" / "config.pbtxt").write_text(CONFIG)
    with warnings.catch_warnings():  # TorchScript is what ptserve serves
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.jit.script(AddSub()).save(str(root / "add_sub" / "1" / "model.pt"))
    return root


def tls_flags(pki, mutual=None):
    flags = ["--grpc-server-cert", pki.path("server.pem"), "--grpc-server-key",
             pki.path("server.key")]
    if mutual is None:
        return ["--grpc-use-ssl=true"] + flags
    return ["--grpc-use-ssl-mutual=%s" % mutual, "--grpc-root-cert", pki.path("ca.pem")] + flags


def launch(ptserve_bin, repo, log, *args):
    # --log-verbose 1: every TLS failure's reason is in the log (beyond one
    # a second they are verbose lines).
    return launch_server(ptserve_bin, repo, log, "--log-verbose=1", *args, metrics_port=0,
                         grpc_port=free_port(), grpc_address="127.0.0.1")


@pytest.fixture(scope="module")
def tls_server(ptserve_bin, repo, pki, tmp_path_factory):
    s = launch(ptserve_bin, repo, tmp_path_factory.mktemp("tls") / "server.log",
               *tls_flags(pki))
    assert "gRPC: serving on nghttp2" in s.log() and ", over TLS" in s.log(), s.log()
    yield s
    assert_clean_exit(s)


@pytest.fixture(scope="module")
def mutual_server(ptserve_bin, repo, pki, tmp_path_factory):
    s = launch(ptserve_bin, repo, tmp_path_factory.mktemp("mtls") / "server.log",
               *tls_flags(pki, mutual="true"))
    assert ", over TLS, client certificates required" in s.log(), s.log()
    yield s
    assert_clean_exit(s)


# ---------------------------------------------------------------- clients

def client(server, pki, ca="ca", cert=None):
    """tritonclient over TLS to localhost, trusting <ca>.pem, presenting
    <cert>.pem when given."""
    kw = {}
    if cert:
        kw = {"private_key": pki.path(cert + ".key"),
              "certificate_chain": pki.path(cert + ".pem")}
    return grpcclient.InferenceServerClient("localhost:%d" % server.grpc_port, ssl=True,
                                            root_certificates=pki.path(ca + ".pem"), **kw)


def add_sub_inputs(a, b):
    ins = [grpcclient.InferInput("INPUT0", list(a.shape), "FP32"),
           grpcclient.InferInput("INPUT1", list(b.shape), "FP32")]
    ins[0].set_data_from_numpy(a)
    ins[1].set_data_from_numpy(b)
    return ins


def values(rng, shape):
    """Multiples of 1/4 below 256: their sums and differences are exact."""
    return (rng.integers(-1024, 1024, shape) / 4.0).astype(np.float32)


def assert_add_sub(c, shape, rng):
    a, b = values(rng, shape), values(rng, shape)
    r = c.infer("add_sub", add_sub_inputs(a, b), client_timeout=TIMEOUT)
    np.testing.assert_array_equal(r.as_numpy("OUTPUT0"), a + b)
    np.testing.assert_array_equal(r.as_numpy("OUTPUT1"), a - b)


def refused(call):
    """The call fails as a gRPC client sees a refused connection."""
    with pytest.raises(InferenceServerException) as info:
        call()
    assert "UNAVAILABLE" in str(info.value.status()), info.value
    return info.value


def logged(server, words):
    return wait_for("'%s' in the server's log" % words, lambda: words in server.log(),
                    timeout=TIMEOUT)


def client_hello():
    """The first bytes a TLS client sends (its ClientHello), from Python's
    ssl on memory buffers."""
    ctx = ssl.create_default_context()
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(incoming, outgoing, server_hostname="localhost")
    with pytest.raises(ssl.SSLWantReadError):
        obj.do_handshake()
    return outgoing.read()


# ---------------------------------------------------------------- TLS

def test_tls_client_infers(tls_server, pki):
    rng = np.random.default_rng(48)
    with client(tls_server, pki) as c:
        assert c.is_server_live(client_timeout=TIMEOUT)
        assert c.is_model_ready("add_sub", client_timeout=TIMEOUT)
        assert_add_sub(c, (1, 4), rng)
        # Two 3x224x224 images per input: 1.2 MB each way, many TLS records.
        assert_add_sub(c, (2, 3 * 224 * 224), rng)
        # Several calls in flight on the one connection.
        pairs = [(values(rng, (1, 1000)), values(rng, (1, 1000))) for _ in range(16)]
        done, lock = {}, threading.Lock()

        def finished(i):
            def cb(result, error):
                with lock:
                    done[i] = (result, error)
            return cb
        for i, (a, b) in enumerate(pairs):
            c.async_infer("add_sub", add_sub_inputs(a, b), callback=finished(i))
        wait_for("16 answers", lambda: len(done) == 16, timeout=TIMEOUT)
        for i, (a, b) in enumerate(pairs):
            result, error = done[i]
            assert error is None, error
            np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)


def test_tls_stream(tls_server, pki):
    rng = np.random.default_rng(7)
    sent, answers = [], []
    with client(tls_server, pki) as c:
        c.start_stream(callback=lambda result, error: answers.append((result, error)))
        for i in range(5):
            a, b = values(rng, (1, 64)), values(rng, (1, 64))
            sent.append((a, b))
            c.async_stream_infer("add_sub", add_sub_inputs(a, b), request_id=str(i))
        wait_for("5 streamed answers", lambda: len(answers) == 5, timeout=TIMEOUT)
        c.stop_stream()
    by_id = {r.get_response().id: r for r, e in answers if e is None}
    assert len(by_id) == 5, answers
    for i, (a, b) in enumerate(sent):
        np.testing.assert_array_equal(by_id[str(i)].as_numpy("OUTPUT1"), a - b)


def test_alpn_h2_and_tls_version(tls_server, pki):
    """The server chooses h2 among the client's protocols, over TLS 1.2 or
    1.3, with a chain Python's ssl verifies for localhost."""
    ctx = ssl.create_default_context(cafile=pki.path("ca.pem"))
    ctx.set_alpn_protocols(["http/1.1", "h2"])
    with socket.create_connection(("127.0.0.1", tls_server.grpc_port), timeout=TIMEOUT) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as s:
            assert s.selected_alpn_protocol() == "h2"
            assert s.version() in ("TLSv1.2", "TLSv1.3")
            # HTTP/2 follows: the server's SETTINGS frame (type 4, stream 0).
            head = s.recv(9)
            assert len(head) == 9 and head[3] == 4, head


def test_plaintext_client_is_refused(tls_server, pki):
    """A client without TLS gets no answer, its connection alone is closed
    (with the reason in the log) and the server serves the others."""
    with grpcclient.InferenceServerClient("127.0.0.1:%d" % tls_server.grpc_port) as plain:
        refused(lambda: plain.is_server_live(client_timeout=TIMEOUT))
    logged(tls_server, "TLS handshake failed: wrong version number (a client without TLS?)")
    # The raw HTTP/2 preface: the server closes the socket.
    with socket.create_connection(("127.0.0.1", tls_server.grpc_port), timeout=TIMEOUT) as raw:
        raw.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")
        try:
            while raw.recv(4096):
                pass  # a TLS alert, then the end
        except ConnectionResetError:
            pass
    with client(tls_server, pki) as c:
        assert_add_sub(c, (2, 8), np.random.default_rng(1))


def test_stalled_handshakes_hold_no_one(tls_server, pki):
    """Half a ClientHello, a silent socket, and one that goes away mid-hello
    do not keep a TLS client from being served; the server stays whole."""
    hello = client_hello()
    half = socket.create_connection(("127.0.0.1", tls_server.grpc_port), timeout=TIMEOUT)
    half.sendall(hello[:len(hello) // 2])
    silent = socket.create_connection(("127.0.0.1", tls_server.grpc_port), timeout=TIMEOUT)
    with socket.create_connection(("127.0.0.1", tls_server.grpc_port), timeout=TIMEOUT) as gone:
        gone.sendall(hello[:20])
    try:
        with client(tls_server, pki) as c:
            assert_add_sub(c, (1, 16), np.random.default_rng(2))
        # The rest of the hello, one byte at a time: the handshake goes on.
        for i in range(len(hello) // 2, len(hello)):
            half.sendall(hello[i:i + 1])
            time.sleep(0.001)
        half.settimeout(TIMEOUT)
        assert half.recv(5)[0] == 0x16  # a TLS handshake record: ServerHello
    finally:
        half.close()
        silent.close()
    with client(tls_server, pki) as c:
        assert c.is_server_live(client_timeout=TIMEOUT)


def test_client_trusting_another_ca_fails(tls_server, pki):
    with client(tls_server, pki, ca="other_ca") as c:
        refused(lambda: c.is_server_live(client_timeout=TIMEOUT))
    with client(tls_server, pki) as c:
        assert_add_sub(c, (1, 4), np.random.default_rng(3))


# ---------------------------------------------------------------- mutual TLS

def test_mutual_client_with_its_certificate_infers(mutual_server, pki):
    with client(mutual_server, pki, cert="client") as c:
        assert c.is_server_ready(client_timeout=TIMEOUT)
        assert_add_sub(c, (4, 256), np.random.default_rng(4))


@pytest.mark.parametrize("cert,reason", [
    (None, "peer did not return a certificate"),
    ("stranger", "certificate verify failed (the client's certificate: unable to get local "
                 "issuer certificate)"),
    ("expired", "certificate verify failed (the client's certificate: certificate has "
                "expired)"),
])
def test_mutual_refuses(mutual_server, pki, cert, reason):
    """No certificate, one of another CA, an expired one: refused, the
    reason logged, and the server serves a proper client right after."""
    with client(mutual_server, pki, cert=cert) as c:
        refused(lambda: c.is_server_live(client_timeout=TIMEOUT))
    logged(mutual_server, "TLS handshake failed: " + reason)
    with client(mutual_server, pki, cert="client") as c:
        assert_add_sub(c, (1, 4), np.random.default_rng(5))


# ---------------------------------------------------------------- flags

def test_mutual_false_is_tls_without_client_certificates(ptserve_bin, repo, pki, tmp_path):
    """As tritonserver: --grpc-use-ssl-mutual turns TLS on whatever its
    value; false asks no client certificate, so --grpc-root-cert has no
    effect (said in the log)."""
    s = launch(ptserve_bin, repo, tmp_path / "server.log", *tls_flags(pki, mutual="false"))
    try:
        assert "--grpc-root-cert has no effect: client certificates are asked for only with " \
               "--grpc-use-ssl-mutual true" in s.log()
        with client(s, pki) as c:
            assert_add_sub(c, (1, 4), np.random.default_rng(6))
        with grpcclient.InferenceServerClient("127.0.0.1:%d" % s.grpc_port) as plain:
            refused(lambda: plain.is_server_live(client_timeout=TIMEOUT))
    finally:
        assert_clean_exit(s)


def test_certificate_flags_without_tls_are_ignored(ptserve_bin, repo, pki, tmp_path):
    """As tritonserver: without --grpc-use-ssl the files are not read and
    gRPC is plaintext; each flag is named in a warning."""
    s = launch(ptserve_bin, repo, tmp_path / "server.log", "--grpc-server-cert",
               pki.path("missing.pem"), "--grpc-root-cert", pki.path("ca.pem"))
    try:
        log = s.log()
        for flag in ("--grpc-server-cert", "--grpc-root-cert"):
            assert flag + " has no effect: gRPC is served without TLS" in log, log
        assert ", without TLS" in log
        with grpcclient.InferenceServerClient("127.0.0.1:%d" % s.grpc_port) as plain:
            assert_add_sub(plain, (1, 4), np.random.default_rng(8))
    finally:
        assert_clean_exit(s)


def bad_flag_cases():
    return [
        (["--grpc-use-ssl=true"],
         "gRPC over TLS (--grpc-use-ssl) needs --grpc-server-cert and --grpc-server-key"),
        (["--grpc-use-ssl=true", "--grpc-server-cert", "{server.pem}"],
         "gRPC over TLS (--grpc-use-ssl) needs --grpc-server-key"),
        (["--grpc-use-ssl=true", "--grpc-server-cert", "{missing.pem}", "--grpc-server-key",
          "{server.key}"],
         "--grpc-server-cert '{missing.pem}' can not be read: No such file or directory"),
        (["--grpc-use-ssl=true", "--grpc-server-cert", "{junk.pem}", "--grpc-server-key",
          "{server.key}"],
         "--grpc-server-cert '{junk.pem}' holds no PEM certificate"),
        (["--grpc-use-ssl=true", "--grpc-server-cert", "{server.pem}", "--grpc-server-key",
          "{server.pem}"],
         "--grpc-server-key '{server.pem}' holds no PEM private key"),
        (["--grpc-use-ssl=true", "--grpc-server-cert", "{server.pem}", "--grpc-server-key",
          "{client.key}"],
         "--grpc-server-key '{client.key}' is not the key of --grpc-server-cert "
         "'{server.pem}'"),
        (["--grpc-use-ssl-mutual=true", "--grpc-server-cert", "{server.pem}",
          "--grpc-server-key", "{server.key}"],
         "--grpc-use-ssl-mutual needs --grpc-root-cert"),
        (["--grpc-use-ssl-mutual=true", "--grpc-server-cert", "{server.pem}",
          "--grpc-server-key", "{server.key}", "--grpc-root-cert", "{missing.pem}"],
         "--grpc-root-cert '{missing.pem}' can not be read: No such file or directory"),
        (["--grpc-use-ssl=false", "--grpc-use-ssl-mutual=true"],
         "--grpc-use-ssl false contradicts --grpc-use-ssl-mutual"),
        (["--grpc-use-ssl=maybe"],
         "invalid value 'maybe' for --grpc-use-ssl: expected true/false, 1/0 or on/off"),
        (["--grpc-server-cert="], "--grpc-server-cert needs a file, got an empty value"),
        (["--grpc-use-ssl"], "option '--grpc-use-ssl' needs a value"),
    ]


@pytest.mark.parametrize("args,message", bad_flag_cases())
def test_bad_flags_refuse_to_start(ptserve_bin, model_repo, pki, args, message):
    """A bad combination or file stops ptserve before any model loads, with
    a message naming the flag and the file."""
    def fill(text):
        for name in ("server.pem", "server.key", "client.key", "junk.pem", "missing.pem"):
            text = text.replace("{%s}" % name, pki.path(name))
        return text
    cmd = [ptserve_bin, "--model-repository", model_repo("identity"), "--http-port", "0",
           "--grpc-port", "0", "--metrics-port", "0"] + [fill(a) for a in args]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    out = run.stdout + run.stderr
    assert run.returncode == 1, out
    assert fill(message) in out, out
    assert "successfully loaded" not in out, out
    assert_no_sanitizer_report(out)
