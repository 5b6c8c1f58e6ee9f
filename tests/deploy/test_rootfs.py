"""The container image's root filesystem, without a container engine.

scripts/rootfs.sh assembles the tree that deploy/Containerfile copies into an
empty image. This test builds it from the binary under test and runs it the
way a container engine would: a private mount namespace with /proc, /sys and
/dev mounted, chroot into the tree, the image's USER, ENTRYPOINT and CMD read
from the Containerfile itself. ptserve must load a TorchScript model there
(LibTorch from the tree, nothing from the host) and answer what torch
computes; the Containerfile's HEALTHCHECK command must pass while it is ready
and fail once a stop has begun.
"""
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile

import numpy as np
import pytest
import requests

from deployutil import ROOT, free_port, needs_root, serving, wait_for

CONTAINERFILE = os.path.join(ROOT, "deploy", "Containerfile")

CONFIG = """
name: "affine"
platform: "pytorch_libtorch"
max_batch_size: 0
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ -1 ] } ]
"""


def containerfile_runtime():
    """USER, ENTRYPOINT, CMD and HEALTHCHECK of the Containerfile's last stage."""
    text = open(CONTAINERFILE).read().replace("\\\n", " ")
    last = text[text.rindex("\nFROM "):]
    out = {}
    for line in last.splitlines():
        m = re.match(r"^(USER|ENTRYPOINT|CMD|HEALTHCHECK)\s+(.*)$", line.strip())
        if m:
            out[m.group(1)] = m.group(2).strip()
    out["ENTRYPOINT"] = json.loads(out["ENTRYPOINT"])
    out["CMD"] = json.loads(out["CMD"])
    out["HEALTHCHECK"] = json.loads(out["HEALTHCHECK"][out["HEALTHCHECK"].index("CMD ") + 4:])
    return out


def sandbox(tree, user, argv, **popen):
    """argv run as a container engine would: own mount namespace, /proc /sys
    /dev mounted into the tree, chroot, user:group."""
    script = ('mount -t proc proc "$1/proc" && mount -t sysfs sysfs "$1/sys" && '
              'mount --rbind /dev "$1/dev" && d=$1 u=$2 && shift 2 && '
              'exec chroot --userspec="$u" "$d" "$@"')
    return subprocess.Popen(["unshare", "--mount", "--propagation", "private", "--",
                             "/bin/sh", "-c", script, "sh", tree, user] + list(argv), **popen)


def write_model(repo):
    """A traced affine map y = 2x + 1, with torch from the test's venv."""
    import torch

    class Affine(torch.nn.Module):
        def forward(self, x):
            return 2 * x + 1

    os.makedirs(os.path.join(repo, "affine", "1"))
    with open(os.path.join(repo, "affine", "config.pbtxt"), "w") as f:
        f.write(CONFIG)
    path = os.path.join(repo, "affine", "1", "model.pt")
    torch.jit.trace(Affine(), torch.zeros(3)).save(path)
    return path


@pytest.fixture(scope="module")
def tree(ptserve_bin):
    needs_root()
    work = tempfile.mkdtemp(prefix="pts-rootfs-")
    dest = os.path.join(work, "rootfs")
    try:
        run = subprocess.run([os.path.join(ROOT, "scripts", "rootfs.sh"), ptserve_bin, dest],
                             capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, run.stdout + run.stderr
        print(run.stdout)
        yield dest
    finally:
        shutil.rmtree(work, ignore_errors=True)


def test_tree_holds_only_the_runtime(tree, ptserve_bin):
    assert sorted(os.listdir(tree)) == sorted(
        ["bin", "dev", "etc", "lib", "lib64", "models", "proc", "sys", "tmp", "usr"])
    assert os.readlink(os.path.join(tree, "usr", "bin", "tritonserver")) == "ptserve"
    libs = os.listdir(os.path.join(tree, "usr", "lib", "x86_64-linux-gnu"))
    for lib in ("libtorch_cpu.so", "libc10.so", "libevent-2.1.so.7", "libjansson.so.4",
                "libprotobuf-c.so.1", "libnghttp2.so.14", "libc.so.6", "ld-linux-x86-64.so.2"):
        assert lib in libs, lib
    # OpenSSL serves gRPC over TLS (src/net/tls.c, --grpc-use-ssl, issue 48),
    # so libssl and libcrypto are in the tree. The server links no gRPC core
    # (ptperf's client alone does: issue 50 removed it from the server), nor
    # the abseil under it: those must not come back with OpenSSL.
    assert [f for f in libs if f.startswith("libssl.so")], libs
    assert [f for f in libs if f.startswith("libcrypto.so")], libs
    for absent in ("libgrpc", "libgpr", "libabsl", "libre2", "libupb", "libcares",
                   "libaddress_sorting"):
        assert not [f for f in libs if f.startswith(absent)], (absent, libs)
    # Every library ptserve needs is in the tree, none comes from the host:
    # the loader of the tree, asked inside the chroot, resolves them all there.
    out = subprocess.run(["chroot", tree, "/lib64/ld-linux-x86-64.so.2", "--list",
                          "/usr/bin/ptserve"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "not found" not in out.stdout, out.stdout
    resolved = re.findall(r"=> (\S+)", out.stdout)
    assert resolved and all(p.startswith("/usr/lib/x86_64-linux-gnu/") or
                            p.startswith("/lib/x86_64-linux-gnu/") for p in resolved), resolved
    # The unprivileged user of the Containerfile's USER line exists.
    user = containerfile_runtime()["USER"]
    uid, gid = user.split(":")
    passwd = open(os.path.join(tree, "etc", "passwd")).read()
    assert re.search(r"^ptserve:x:%s:%s:" % (uid, gid), passwd, re.M), passwd
    size = sum(os.lstat(os.path.join(d, f)).st_size
               for d, _, fs in os.walk(tree) for f in fs)
    print("rootfs size: %.0f MiB" % (size / 2**20))


def test_serves_a_torchscript_model_as_the_image_would(tree, ptserve_bin):
    import torch

    rt = containerfile_runtime()
    model_path = write_model(os.path.join(tree, "models"))
    http, grpc, metrics = free_port(), free_port(), free_port()
    argv = rt["ENTRYPOINT"] + rt["CMD"] + [
        "--http-port=%d" % http, "--grpc-port=%d" % grpc, "--metrics-port=%d" % metrics,
        "--exit-drain-secs=600"]
    log = tempfile.TemporaryFile(mode="w+")
    proc = sandbox(tree, rt["USER"], argv, stdout=log, stderr=subprocess.STDOUT)

    def logtext():
        log.seek(0)
        return log.read()

    url = "http://127.0.0.1:%d" % http
    health = [a.replace(":8000/", ":%d/" % http) for a in rt["HEALTHCHECK"]]
    assert health != rt["HEALTHCHECK"], "the HEALTHCHECK does not probe port 8000"

    try:
        wait_for(serving(url, proc, logtext), 120, "ptserve in the chroot ready", logtext)
        # It runs as the image's user, not as root.
        status = open("/proc/%d/status" % proc.pid).read()
        uid = re.search(r"^Uid:\s+(\d+)", status, re.M).group(1)
        assert uid == rt["USER"].split(":")[0]
        # The answer is what torch computes with the same model file.
        x = np.array([0.5, -1.25, 3.0, 7.5], dtype=np.float32)
        expected = torch.jit.load(model_path)(torch.from_numpy(x)).numpy()
        r = requests.post(url + "/v2/models/affine/infer", timeout=30, json={
            "inputs": [{"name": "INPUT__0", "datatype": "FP32", "shape": [4],
                        "data": x.tolist()}]})
        assert r.status_code == 200, r.text
        out = r.json()["outputs"][0]
        assert out["shape"] == [4]
        np.testing.assert_allclose(out["data"], expected, rtol=1e-6)
        # The HEALTHCHECK passes now ...
        hc = sandbox(tree, rt["USER"], health, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        assert hc.wait(timeout=60) == 0, hc.stdout.read()
        # ... and fails once SIGTERM began the drain, while inference goes on.
        proc.send_signal(signal.SIGTERM)
        wait_for(lambda: requests.get(url + "/v2/health/ready", timeout=2).status_code == 400,
                 30, "readiness failing after SIGTERM", logtext)
        hc = sandbox(tree, rt["USER"], health, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        assert hc.wait(timeout=60) != 0
        r = requests.post(url + "/v2/models/affine/infer", timeout=30, json={
            "inputs": [{"name": "INPUT__0", "datatype": "FP32", "shape": [4],
                        "data": x.tolist()}]})
        assert r.status_code == 200, r.text
        proc.send_signal(signal.SIGTERM)  # the second signal ends the drain
        assert proc.wait(timeout=60) == 0, logtext()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()
