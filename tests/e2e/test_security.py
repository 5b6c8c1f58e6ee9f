"""Security: names that could leave the repository, --http-restricted-api,
and the documented default bind address.

Expected texts come from protocol-facts §1.1 (the 403 body) and the issue
(names with '..' or '/' are refused on every path that takes them).
"""
import http.client
import json
import os
import subprocess
import time

import pytest
import requests

from conftest import logged_http_port

TIMEOUT = 30

INFER_BODY = {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 4],
                          "data": [1, 2, 3, 4]}]}

# Every endpoint that takes a model name, with its method.
MODEL_PATHS = [
    ("GET", "/v2/models/{m}"),
    ("GET", "/v2/models/{m}/ready"),
    ("GET", "/v2/models/{m}/config"),
    ("GET", "/v2/models/{m}/versions/1"),
    ("POST", "/v2/models/{m}/infer"),
    ("POST", "/v2/models/{m}/versions/1/infer"),
    ("POST", "/v2/repository/models/{m}/load"),
    ("POST", "/v2/repository/models/{m}/unload"),
]

# Encoded so that the HTTP path keeps them inside one segment.
BAD_NAMES = ["..", "..%2F..%2Fetc", "id_fp32%2F..%2Fid_fp32", "a%2Fb", "%2Fetc%2Fpasswd",
             "..%5C..", "x%2E%2E"]


def raw_request(server, method, path, body=None, headers=None):
    """Sends the path exactly as written (requests would normalise '..')."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    data = json.dumps(body).encode() if body is not None else None
    conn.request(method, path, body=data, headers=headers or {})
    resp = conn.getresponse()
    payload = resp.read()
    conn.close()
    return resp.status, payload


@pytest.mark.parametrize("name", BAD_NAMES)
def test_model_names_with_dot_dot_or_slash_are_refused(start_server, model_repo, name):
    server = start_server(model_repo("identity"))
    for method, pattern in MODEL_PATHS:
        path = pattern.format(m=name)
        status, payload = raw_request(server, method, path,
                                      body=INFER_BODY if path.endswith("infer") else None)
        assert status == 400, (path, status, payload)
        msg = json.loads(payload)["error"]
        assert msg.startswith("invalid model name '"), (path, msg)
        assert "can not contain '/'" in msg
    # The server is unharmed and a good name still works.
    r = requests.post(server.url + "/v2/models/id_fp32/infer", json=INFER_BODY)
    assert r.status_code == 200
    assert r.json()["outputs"][0]["data"] == [1, 2, 3, 4]


def test_literal_dot_dot_segments(start_server, model_repo):
    server = start_server(model_repo("identity"))
    for path in ["/v2/models/../config", "/v2/models/../../infer", "/v2/models/id_fp32/../ready"]:
        status, payload = raw_request(server, "GET", path)
        # Either refused as a name or not a route at all; never a lookup.
        assert status in (400, 404), (path, status, payload)
        assert "error" in json.loads(payload)


def test_repository_name_with_slash_is_refused(start_server, model_repo):
    server = start_server(model_repo("identity"))
    status, payload = raw_request(server, "POST", "/v2/repository/..%2Fother/models/m/load")
    assert status == 400
    assert json.loads(payload)["error"].startswith("invalid repository name '../other'")


def write_model(root, name, config):
    d = root / name
    (d / "1").mkdir(parents=True)
    (d / "config.pbtxt").write_text(config)


@pytest.mark.parametrize("filename", ["../../../../etc/passwd", "sub/model.pt", ".."])
def test_model_file_name_outside_version_dir(start_server, tmp_path, filename):
    write_model(tmp_path, "evil",
                'backend: "identity"\ndefault_model_filename: "%s"\nmax_batch_size: 0\n'
                'input [ { name: "I" data_type: TYPE_INT32 dims: [ 1 ] } ]\n'
                'output [ { name: "O" data_type: TYPE_INT32 dims: [ 1 ] } ]\n' % filename)
    server = start_server(tmp_path, "--exit-on-error=false", "--strict-readiness=false")
    index = requests.post(server.url + "/v2/repository/index").json()
    entry = [e for e in index if e["name"] == "evil"][0]
    assert entry["state"] == "UNAVAILABLE"
    assert "default_model_filename '%s' must be a file name inside the version directory" \
        % filename in entry["reason"]


# ------------------------------------------------------ --http-restricted-api

RESTRICT = ["--http-restricted-api=inference,model-config:infer-key=secret",
            "--http-restricted-api", "statistics:stats-key=s:v"]


def expect_403(resp, header):
    assert resp.status_code == 403, resp.text
    assert resp.headers["Content-Type"] == "application/json"
    assert resp.json() == {"error": "This API is restricted, expecting header '%s'" % header}


def test_restricted_api_needs_the_header(start_server, model_repo):
    server = start_server(model_repo("identity"), *RESTRICT)
    url = server.url
    expect_403(requests.post(url + "/v2/models/id_fp32/infer", json=INFER_BODY), "infer-key")
    expect_403(requests.post(url + "/v2/models/id_fp32/infer", json=INFER_BODY,
                             headers={"infer-key": "wrong"}), "infer-key")
    expect_403(requests.get(url + "/v2/models/id_fp32/config"), "infer-key")
    expect_403(requests.get(url + "/v2/models/stats"), "stats-key")
    expect_403(requests.get(url + "/v2/models/id_fp32/stats"), "stats-key")
    # Header names are case-insensitive; the value is compared exactly.
    r = requests.post(url + "/v2/models/id_fp32/infer", json=INFER_BODY,
                      headers={"Infer-Key": "secret"})
    assert r.status_code == 200
    assert r.json()["outputs"][0]["data"] == [1, 2, 3, 4]
    assert requests.get(url + "/v2/models/id_fp32/config",
                        headers={"infer-key": "secret"}).status_code == 200
    assert requests.get(url + "/v2/models/stats", headers={"stats-key": "s:v"}).status_code == 200
    # Groups not listed stay open.
    assert requests.get(url + "/v2").status_code == 200
    assert requests.get(url + "/v2/health/ready").status_code == 200
    assert requests.get(url + "/v2/models/id_fp32").status_code == 200
    assert requests.post(url + "/v2/repository/index").status_code == 200
    # The restriction comes before the method check, as in tritonserver.
    expect_403(requests.get(url + "/v2/models/id_fp32/infer"), "infer-key")
    # Unknown paths stay 404.
    assert requests.get(url + "/v2/nothing").status_code == 404


def test_restricted_health(ptserve_bin, model_repo, tmp_path):
    # The harness polls /v2/health/live without headers, so start this one
    # by hand and poll with the header.
    log = open(tmp_path / "server.log", "w")
    proc = subprocess.Popen([ptserve_bin, "--model-repository", model_repo("identity"),
                             "--http-port", "0", "--http-address", "127.0.0.1",
                             "--grpc-port", "0", "--metrics-port", "0",
                             "--http-restricted-api=health:health-key=h:v"],
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        url = "http://127.0.0.1:%d" % logged_http_port(proc, tmp_path / "server.log")
        deadline = time.time() + 60
        while True:
            assert proc.poll() is None, "ptserve exited during start-up"
            assert time.time() < deadline, "ptserve did not become ready"
            try:
                if requests.get(url + "/v2/health/ready", headers={"health-key": "h:v"},
                                timeout=TIMEOUT).status_code == 200:
                    break
            except requests.ConnectionError:
                pass
            time.sleep(0.05)
        expect_403(requests.get(url + "/v2/health/live"), "health-key")
        expect_403(requests.get(url + "/v2/health/ready", headers={"health-key": "h"}),
                   "health-key")
        expect_403(requests.get(url + "/v2/models/id_fp32/ready"), "health-key")
        assert requests.get(url + "/v2/models/id_fp32/ready",
                            headers={"health-key": "h:v"}).status_code == 200
        assert requests.get(url + "/v2/models/id_fp32").status_code == 200
    finally:
        proc.terminate()
        assert proc.wait(timeout=30) == 0
        log.close()


@pytest.mark.parametrize("value,why", [
    ("inference", "expected <api>[,<api>...]:<header>=<value>"),
    ("inference:key", "expected <api>[,<api>...]:<header>=<value>"),
    ("inference:key=", "expected <api>[,<api>...]:<header>=<value>"),
    ("everything:k=v", "unknown API 'everything'"),
    ("health,health:k=v", "API 'health' is already restricted"),
])
def test_restricted_api_bad_values_refused_at_start(ptserve_bin, model_repo, value, why):
    p = subprocess.run([ptserve_bin, "--model-repository", model_repo("identity"),
                        "--http-restricted-api=" + value], capture_output=True, text=True,
                       timeout=30)
    assert p.returncode == 1
    assert why in p.stderr


def test_same_api_in_two_flags_refused(ptserve_bin, model_repo):
    p = subprocess.run([ptserve_bin, "--model-repository", model_repo("identity"),
                        "--http-restricted-api=health:a=1",
                        "--http-restricted-api=metadata,health:b=2"],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 1
    assert "API 'health' is already restricted" in p.stderr


def test_default_bind_address_is_documented(ptserve_bin):
    # tritonserver's default, 0.0.0.0 (every interface): stated in --help and
    # in docs/reliability.md so that nobody exposes the server by surprise.
    p = subprocess.run([ptserve_bin, "--help"], capture_output=True, text=True, timeout=30)
    assert "--http-address <addr>        Address to bind (default 0.0.0.0)" in p.stdout
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(root, "docs", "reliability.md")) as f:
        assert "0.0.0.0" in f.read()
