"""Every manifest of deploy/, checked offline.

Kubernetes kinds (Deployment, Service, PodDisruptionBudget) are validated by
kubernetes-validate (PyPI; it bundles the API server's OpenAPI schemas for
Kubernetes 1.25 to 1.37) in strict mode, which refuses unknown fields, against
the oldest and the newest version ptserve's manifests claim. KServe's kinds
have no schema there: they are validated with jsonschema against the schemas
of deploy/schemas/, written from KServe's API types, whose Kubernetes parts
(Container, Volume, Toleration, ObjectMeta ...) refer to the same bundled
definitions. Then the settings that must agree with ptserve's behaviour are
checked: probes on /v2/health/live and /v2/health/ready, a preStop wait, a
termination grace period that covers preStop plus --exit-timeout-secs,
resource requests, GPUs for GPU pods, Prometheus scraping. The systemd unit
goes through `systemd-analyze verify`.
"""
import copy
import glob
import json
import os
import re
import shutil
import subprocess

import jsonschema
import kubernetes_validate
import pytest
import referencing
import yaml

from deployutil import ROOT

DEPLOY = os.path.join(ROOT, "deploy")
K8S_VERSIONS = ("1.28.0", "1.37.0")
KSERVE_SCHEMAS = {
    ("serving.kserve.io/v1alpha1", "ServingRuntime"): "servingruntime-serving-v1alpha1.json",
    ("serving.kserve.io/v1alpha1", "ClusterServingRuntime"): "servingruntime-serving-v1alpha1.json",
    ("serving.kserve.io/v1beta1", "InferenceService"): "inferenceservice-serving-v1beta1.json",
}


def manifests():
    out = []
    for path in sorted(glob.glob(os.path.join(DEPLOY, "*", "*.yaml"))):
        with open(path) as f:
            for doc in yaml.safe_load_all(f):
                if doc:
                    out.append((os.path.relpath(path, ROOT), doc))
    return out


ALL = manifests()


def of_kind(kind):
    return [d for _, d in ALL if d["kind"] == kind]


def k8s_definitions():
    """kubernetes-validate's bundled definitions (newest version, strict)."""
    base = os.path.join(os.path.dirname(kubernetes_validate.__file__), "kubernetes-json-schema")
    with open(os.path.join(base, "v%s-local-strict" % K8S_VERSIONS[-1], "_definitions.json")) as f:
        return json.load(f)


def kserve_validator(schema_file):
    with open(os.path.join(DEPLOY, "schemas", schema_file)) as f:
        schema = json.load(f)
    registry = referencing.Registry().with_resources([
        (schema["$id"], referencing.Resource.from_contents(schema)),
        ("https://kubernetes.io/api/_definitions.json",
         referencing.Resource.from_contents(k8s_definitions())),
    ])
    return jsonschema.Draft202012Validator(schema, registry=registry)


def validate(doc):
    """Raises on an invalid manifest; returns which validator checked it."""
    key = (doc["apiVersion"], doc["kind"])
    if key in KSERVE_SCHEMAS:
        kserve_validator(KSERVE_SCHEMAS[key]).validate(doc)
        return "jsonschema"
    for v in K8S_VERSIONS:
        kubernetes_validate.validate(doc, v, strict=True)
    return "kubernetes-validate"


def test_deploy_has_the_expected_manifests():
    kinds = sorted(d["kind"] for _, d in ALL)
    assert kinds == sorted(["Deployment", "Deployment", "Service", "PodDisruptionBudget",
                            "ServingRuntime", "InferenceService", "InferenceService"]), kinds


@pytest.mark.parametrize("path,doc", ALL, ids=["%s:%s/%s" % (p, d["kind"], d["metadata"]["name"])
                                                for p, d in ALL])
def test_manifest_is_valid(path, doc):
    validate(doc)


@pytest.mark.parametrize("mutate,kind", [
    (lambda d: d["spec"]["template"]["spec"]["containers"][0].update(readinessprobe={}),
     "Deployment"),
    (lambda d: d["spec"].update(replicas="three"), "Deployment"),
    (lambda d: d["spec"]["containers"][0].update(image=42), "ServingRuntime"),
    (lambda d: d["spec"]["containers"][0]["readinessProbe"].update(httpGet={"path": 1}),
     "ServingRuntime"),
    (lambda d: d["spec"].update(protocolVersions=["v3"]), "ServingRuntime"),
    (lambda d: d["spec"]["predictor"]["model"].update(storageUri="/local/path"),
     "InferenceService"),
    (lambda d: d["spec"]["predictor"]["model"].update(resource={}), "InferenceService"),
    (lambda d: d["spec"]["predictor"].pop("model"), "InferenceService"),
])
def test_validators_refuse_a_broken_manifest(mutate, kind):
    """The validation above can fail: one mistake per case must be caught."""
    doc = copy.deepcopy(of_kind(kind)[0])
    mutate(doc)
    with pytest.raises(jsonschema.ValidationError):
        validate(doc)


# ---------------------------------------------------------- what must agree


def flag(args, name):
    for a in args:
        if a.startswith("--%s=" % name):
            return a.split("=", 1)[1]
    return None


def prestop_seconds(container):
    cmd = container["lifecycle"]["preStop"]["exec"]["command"]
    assert cmd[:2] == ["/bin/busybox", "sleep"], cmd  # busybox is in the image (rootfs.sh)
    return int(cmd[2])


def check_container(c, grace, http_port):
    """Probes, preStop, grace, resources, security of one ptserve container."""
    assert c["readinessProbe"]["httpGet"]["path"] == "/v2/health/ready"
    assert c["livenessProbe"]["httpGet"]["path"] == "/v2/health/live"
    for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
        port = c[probe]["httpGet"]["port"]
        if isinstance(port, str):
            port = {p["name"]: p["containerPort"] for p in c["ports"]}[port]
        assert port == http_port, (probe, port)
    exit_timeout = int(flag(c["args"], "exit-timeout-secs"))
    drain = int(flag(c["args"], "exit-drain-secs") or 0)
    # SIGKILL must not come before ptserve's own deadline.
    assert grace >= prestop_seconds(c) + drain + exit_timeout + 5, (grace, c["args"])
    assert c["resources"]["requests"]["cpu"] and c["resources"]["requests"]["memory"]
    sc = c["securityContext"]
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["readOnlyRootFilesystem"] is True


def test_plain_deployments_agree_with_ptserve():
    deployments = of_kind("Deployment")
    assert len(deployments) == 2
    for d in deployments:
        pod = d["spec"]["template"]
        c = pod["spec"]["containers"][0]
        http_port = int(flag(c["args"], "http-port"))
        check_container(c, pod["spec"]["terminationGracePeriodSeconds"], http_port)
        assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
        ann = pod["metadata"]["annotations"]
        assert ann["prometheus.io/scrape"] == "true"
        assert int(ann["prometheus.io/port"]) == int(flag(c["args"], "metrics-port"))
        assert d["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
        gpu = d["metadata"]["name"].endswith("-gpu")
        res = c["resources"]
        assert ("nvidia.com/gpu" in res["limits"]) == gpu
        if gpu:
            assert res["limits"]["nvidia.com/gpu"] == res["requests"]["nvidia.com/gpu"]
    (svc,) = of_kind("Service")
    ports = {p["name"]: p["port"] for p in svc["spec"]["ports"]}
    assert ports == {"http": 8000, "grpc": 8001, "metrics": 8002}
    for d in deployments:  # the Service selects every Deployment's pods
        labels = d["spec"]["template"]["metadata"]["labels"]
        assert all(labels.get(k) == v for k, v in svc["spec"]["selector"].items())


def test_kserve_runtime_and_services_agree_with_ptserve():
    (rt,) = of_kind("ServingRuntime")
    spec = rt["spec"]
    assert set(spec["protocolVersions"]) == {"v2", "grpc-v2"}
    formats = {f["name"] for f in spec["supportedModelFormats"]}
    assert {"pytorch", "torchscript", "pt2"} <= formats
    (c,) = spec["containers"]
    assert c["name"] == "kserve-container"  # KServe's convention
    assert flag(c["args"], "model-repository") == "/mnt/models"  # the storage initializer's mount
    assert spec["annotations"]["prometheus.kserve.io/port"] == flag(c["args"], "metrics-port")
    for isvc in of_kind("InferenceService"):
        pred = isvc["spec"]["predictor"]
        assert pred["model"]["runtime"] == rt["metadata"]["name"]
        assert pred["model"]["modelFormat"]["name"] in formats
        assert pred["model"]["protocolVersion"] in spec["protocolVersions"]
        check_container(c, pred["terminationGracePeriodSeconds"], int(flag(c["args"], "http-port")))
        # Knative (KServe's Serverless mode) refuses lifecycle hooks.
        if "lifecycle" in c:
            mode = isvc["metadata"]["annotations"]["serving.kserve.io/deploymentMode"]
            assert mode == "RawDeployment", isvc["metadata"]["name"]
        res = pred["model"]["resources"]
        gpu = isvc["metadata"]["name"].endswith("-gpu")
        assert ("nvidia.com/gpu" in res["limits"]) == gpu


# ---------------------------------------------------------------- systemd

def unit_settings(text):
    out = {}
    for line in text.splitlines():
        m = re.match(r"^([A-Za-z]+)=(.*)$", line)
        if m:
            out.setdefault(m.group(1), []).append(m.group(2))
    return out


def test_systemd_unit(tmp_path, ptserve_bin):
    if shutil.which("systemd-analyze") is None:
        pytest.fail("systemd-analyze missing: scripts/setup.sh installs systemd")
    text = open(os.path.join(DEPLOY, "systemd", "ptserve.service")).read()
    s = unit_settings(text)
    for key, value in (("DynamicUser", "yes"), ("NoNewPrivileges", "yes"),
                       ("ProtectSystem", "strict"), ("Restart", "on-failure"),
                       ("KillSignal", "SIGTERM")):
        assert s[key] == [value], key
    # Nothing reloads on a signal, so no ExecReload; the unit says so.
    assert "ExecReload" not in s
    assert "reloads nothing on a signal" in text
    exec_start = s["ExecStart"][0].split()
    drain = int(flag(exec_start, "exit-drain-secs"))
    exit_timeout = int(flag(exec_start, "exit-timeout-secs"))
    assert int(s["TimeoutStopSec"][0]) >= drain + exit_timeout + 5
    # systemd's own check, with ExecStart pointing at the binary under test.
    unit = tmp_path / "ptserve.service"
    unit.write_text(text.replace("/usr/local/bin/ptserve", os.path.abspath(ptserve_bin)))
    r = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    # Any line about the unit is a complaint ("Unknown key", "Invalid ...").
    assert str(unit) not in r.stdout + r.stderr, r.stdout + r.stderr
