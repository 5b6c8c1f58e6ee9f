"""Ensembles (platform "ensemble", docs/ensembles.md) end to end, through
NVIDIA's tritonclient over HTTP, gRPC and gRPC streaming.

The repository is written here: two TorchScript models scripted by this
test (`scale`: y = x * w + c with fixed w, c; `addsub`: a + b and a - b), an
identity-backend model (`pass`), and the ensemble `chain` over them:

    X --scale--> scaled --\\
                           addsub --> SUM, DIFF
    Y --pass---> y_id ----/

Expected values come from running the same chain in torch here, on the
same model.pt files (torch.jit.load), never from ptserve. Bad ensembles (a
cycle, a tensor nobody writes, an unknown model) are loaded in explicit
mode and must be refused with a message naming what is wrong.
"""
import os
import queue
import threading

import numpy as np
import pytest

from conftest import assert_clean_exit, need_module

torch = need_module("torch")
grpcclient = need_module("tritonclient.grpc")
httpclient = need_module("tritonclient.http")
from tritonclient.utils import InferenceServerException  # noqa: E402

TIMEOUT = 60

SCALE = """name: "scale"
platform: "pytorch_libtorch"
max_batch_size: 8
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 4 ] } ]
"""

ADDSUB = """name: "addsub"
platform: "pytorch_libtorch"
max_batch_size: 8
input [ { name: "a" data_type: TYPE_FP32 dims: [ 4 ] },
        { name: "b" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 4 ] },
         { name: "OUTPUT__1" data_type: TYPE_FP32 dims: [ 4 ] } ]
"""

PASS = """name: "pass"
backend: "identity"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
"""

# The steps are listed out of order on purpose: they run as their inputs
# appear, not in the order written.
CHAIN = """name: "chain"
platform: "ensemble"
max_batch_size: 8
input [ { name: "X" data_type: TYPE_FP32 dims: [ 4 ] },
        { name: "Y" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "SUM" data_type: TYPE_FP32 dims: [ 4 ] },
         { name: "DIFF" data_type: TYPE_FP32 dims: [ 4 ] } ]
ensemble_scheduling {
  step [
    { model_name: "addsub" model_version: -1
      input_map { key: "a" value: "scaled" }
      input_map { key: "b" value: "y_id" }
      output_map { key: "OUTPUT__0" value: "SUM" }
      output_map { key: "OUTPUT__1" value: "DIFF" } },
    { model_name: "scale" model_version: -1
      input_map { key: "INPUT__0" value: "X" }
      output_map { key: "OUTPUT__0" value: "scaled" } },
    { model_name: "pass" model_version: -1
      input_map { key: "INPUT0" value: "Y" }
      output_map { key: "OUTPUT0" value: "y_id" } }
  ]
}
"""


def ensemble_config(name, steps, inputs=("X",), outputs=("OUT",)):
    ins = ", ".join('{ name: "%s" data_type: TYPE_FP32 dims: [ 4 ] }' % i for i in inputs)
    outs = ", ".join('{ name: "%s" data_type: TYPE_FP32 dims: [ 4 ] }' % o for o in outputs)
    body = ", ".join(
        '{ model_name: "%s" input_map { key: "%s" value: "%s" } '
        'output_map { key: "%s" value: "%s" } }' % s for s in steps)
    return ('name: "%s"\nplatform: "ensemble"\nmax_batch_size: 8\ninput [ %s ]\n'
            'output [ %s ]\nensemble_scheduling { step [ %s ] }\n' % (name, ins, outs, body))


# A cycle: s1 reads t2, which s2 writes from t1, which s1 writes.
CYCLE = ensemble_config("bad_cycle", [
    ("pass", "INPUT0", "t2", "OUTPUT0", "t1"),
    ("pass", "INPUT0", "t1", "OUTPUT0", "t2"),
    ("scale", "INPUT__0", "X", "OUTPUT__0", "OUT")])
MISSING = ensemble_config("bad_missing", [
    ("scale", "INPUT__0", "X", "OUTPUT__0", "scaled"),
    ("pass", "INPUT0", "nowhere", "OUTPUT0", "OUT")])
SHAPE = ensemble_config("bad_shape", [
    ("scale", "INPUT__0", "X", "OUTPUT__0", "OUT")]).replace(
        'name: "X" data_type: TYPE_FP32 dims: [ 4 ]', 'name: "X" data_type: TYPE_FP32 dims: [ 5 ]')
# A sequence model (a running sum kept as implicit state) as a step:
# X --seq_acc--> acc --scale--> OUT.
SEQ_ACC = """name: "seq_acc"
platform: "pytorch_libtorch"
max_batch_size: 8
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 4 ] } ]
sequence_batching {
  max_sequence_idle_microseconds: 60000000
  state [ { input_name: "STATE__1" output_name: "OUTPUT__1" data_type: TYPE_FP32 dims: [ 4 ] } ]
}
"""
ACC_SCALED = ensemble_config("acc_scaled", [
    ("seq_acc", "INPUT__0", "X", "OUTPUT__0", "acc"),
    ("scale", "INPUT__0", "acc", "OUTPUT__0", "OUT")])
UNKNOWN = ensemble_config("bad_unknown", [
    ("no_such_model", "INPUT0", "X", "OUTPUT0", "OUT")])


# An ensemble of an ensemble: `outer` runs `chain` as its one step.
OUTER = """name: "outer"
platform: "ensemble"
max_batch_size: 4
input [ { name: "A" data_type: TYPE_FP32 dims: [ 4 ] },
        { name: "B" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "S" data_type: TYPE_FP32 dims: [ 4 ] } ]
ensemble_scheduling { step [ { model_name: "chain"
  input_map { key: "X" value: "A" } input_map { key: "Y" value: "B" }
  output_map { key: "SUM" value: "S" } } ] }
"""

# Two ensembles that use each other.
LOOP_1 = ensemble_config("loop_1", [("loop_2", "X", "X", "OUT", "OUT")])
LOOP_2 = ensemble_config("loop_2", [("loop_1", "X", "X", "OUT", "OUT")])


class Scale(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.tensor([0.5, -2.0, 3.0, 1.25])
        self.c = torch.tensor([1.0, 0.0, -1.5, 2.0])

    def forward(self, x):
        return x * self.w + self.c


class Accumulate(torch.nn.Module):
    def forward(self, x, state):
        total = state + x
        return total, total


class AddSub(torch.nn.Module):
    def forward(self, a, b):
        return a + b, a - b


def write(repo, name, config, module=None):
    os.makedirs(os.path.join(repo, name, "1"), exist_ok=True)
    with open(os.path.join(repo, name, "config.pbtxt"), "w") as f:
        f.write(config)
    if module is not None:
        torch.jit.script(module).save(os.path.join(repo, name, "1", "model.pt"))


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("ensemble_repo"))
    write(d, "scale", SCALE, Scale())
    write(d, "addsub", ADDSUB, AddSub())
    write(d, "pass", PASS)
    write(d, "chain", CHAIN)
    return d


def torch_chain(repo, x, y):
    """The ensemble's graph run in torch on the same files."""
    scale = torch.jit.load(os.path.join(repo, "scale", "1", "model.pt"))
    addsub = torch.jit.load(os.path.join(repo, "addsub", "1", "model.pt"))
    with torch.no_grad():
        scaled = scale(torch.from_numpy(x))
        s, d = addsub(scaled, torch.from_numpy(y))  # `pass` is the identity
    return s.numpy(), d.numpy()


@pytest.fixture(scope="module")
def server(repo, ptserve_bin, tmp_path_factory):
    from conftest import free_port, launch_server
    log = tmp_path_factory.mktemp("ensemble_log") / "server.log"
    s = launch_server(ptserve_bin, repo, str(log), metrics_port=free_port(),
                      grpc_port=free_port())
    yield s
    assert_clean_exit(s)


def inputs(module, x, y):
    ix = module.InferInput("X", list(x.shape), "FP32")
    ix.set_data_from_numpy(x)
    iy = module.InferInput("Y", list(y.shape), "FP32")
    iy.set_data_from_numpy(y)
    return [ix, iy]


def assert_close(got, want):
    """Equal but for rounding. On a GPU host the models run on CUDA (no
    instance_group: KIND_AUTO), where TorchScript's fuser compiles
    x * w + c, once warm, into one kernel with a fused multiply-add (one
    rounding, not two), while the reference runs on the CPU: where a result
    is near zero the two differ by a last bit of the operands (under 1e-6
    for these), which no relative tolerance covers."""
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def sample(rows, seed):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((rows, 4)).astype(np.float32),
            rng.standard_normal((rows, 4)).astype(np.float32))


def http_client(server):
    return httpclient.InferenceServerClient(server.url[len("http://"):])


def grpc_client(server):
    return grpcclient.InferenceServerClient("127.0.0.1:%d" % server.grpc_port)


def test_http_matches_torch_chain(server, repo):
    c = http_client(server)
    x, y = sample(3, 1)
    res = c.infer("chain", inputs(httpclient, x, y))
    want_sum, want_diff = torch_chain(repo, x, y)
    assert_close(res.as_numpy("SUM"), want_sum)
    assert_close(res.as_numpy("DIFF"), want_diff)
    assert res.get_response()["model_name"] == "chain"


def test_http_one_requested_output(server, repo):
    c = http_client(server)
    x, y = sample(1, 2)
    res = c.infer("chain", inputs(httpclient, x, y),
                  outputs=[httpclient.InferRequestedOutput("DIFF")])
    assert res.as_numpy("SUM") is None
    assert_close(res.as_numpy("DIFF"), torch_chain(repo, x, y)[1])


def test_grpc_and_stream_match_torch_chain(server, repo):
    c = grpc_client(server)
    x, y = sample(5, 3)
    res = c.infer("chain", inputs(grpcclient, x, y))
    want_sum, want_diff = torch_chain(repo, x, y)
    assert_close(res.as_numpy("SUM"), want_sum)
    assert_close(res.as_numpy("DIFF"), want_diff)

    answers = queue.Queue()
    c.start_stream(callback=lambda result, error: answers.put((result, error)))
    try:
        expected = {}
        for i in range(8):
            x, y = sample(1 + i % 4, 100 + i)
            rid = "e-%d" % i
            c.async_stream_infer("chain", inputs(grpcclient, x, y), request_id=rid)
            expected[rid] = torch_chain(repo, x, y)
        for _ in range(len(expected)):
            result, error = answers.get(timeout=TIMEOUT)
            assert error is None, error
            rid = result.get_response().id
            assert_close(result.as_numpy("SUM"), expected[rid][0])
            assert_close(result.as_numpy("DIFF"), expected[rid][1])
            del expected[rid]
    finally:
        c.stop_stream()


def test_metadata_and_config(server):
    c = http_client(server)
    meta = c.get_model_metadata("chain")
    assert meta["platform"] == "ensemble"
    assert [i["name"] for i in meta["inputs"]] == ["X", "Y"]
    cfg = c.get_model_config("chain")
    assert cfg["platform"] == "ensemble" and cfg.get("backend", "") == ""
    assert "instance_group" not in cfg or cfg["instance_group"] == []
    steps = cfg["ensemble_scheduling"]["step"]
    assert [s["model_name"] for s in steps] == ["addsub", "scale", "pass"]


def test_step_error_names_step_and_model(server):
    """Y with 5 elements suits the ensemble and `pass` (dims [-1]) but not
    `addsub` (dims [4]): the error names the step and the model."""
    c = http_client(server)
    x = np.zeros((1, 4), np.float32)
    y = np.zeros((1, 5), np.float32)
    with pytest.raises(InferenceServerException) as info:
        c.infer("chain", inputs(httpclient, x, y))
    msg = info.value.message()
    assert "in ensemble 'chain', step 0 (model 'addsub')" in msg, msg
    assert info.value.status() == "400"
    with pytest.raises(InferenceServerException) as info:
        grpc_client(server).infer("chain", inputs(grpcclient, x, y))
    assert "in ensemble 'chain', step 0 (model 'addsub')" in info.value.message()
    assert info.value.status() == "StatusCode.INVALID_ARGUMENT"
    # The server keeps serving.
    x, y = sample(1, 4)
    assert c.infer("chain", inputs(httpclient, x, y)).as_numpy("SUM") is not None


def test_ensemble_batch_limit(server):
    c = http_client(server)
    x, y = sample(9, 5)
    with pytest.raises(InferenceServerException) as info:
        c.infer("chain", inputs(httpclient, x, y))
    # The ensemble's own max_batch_size (8) is checked before any step runs.
    assert "inference request batch-size must be <= 8 for 'chain'" in info.value.message()
    assert info.value.status() == "400"


def test_statistics_for_ensemble_and_composing(server):
    c = http_client(server)

    def successes():
        st = c.get_inference_statistics()["model_stats"]
        return {m["name"]: m["inference_stats"]["success"]["count"] for m in st}

    before = successes()
    for i in range(3):
        x, y = sample(2, 200 + i)
        c.infer("chain", inputs(httpclient, x, y))
    after = successes()
    for name in ("chain", "scale", "addsub", "pass"):
        assert after[name] - before[name] == 3, (name, before, after)


@pytest.fixture
def explicit(start_server, repo, tmp_path):
    d = str(tmp_path / "repo")
    os.makedirs(d)
    for name in ("scale", "addsub", "pass", "chain"):
        os.symlink(os.path.join(repo, name), os.path.join(d, name))
    write(d, "bad_cycle", CYCLE)
    write(d, "bad_missing", MISSING)
    write(d, "bad_unknown", UNKNOWN)
    write(d, "bad_shape", SHAPE)
    write(d, "seq_acc", SEQ_ACC, Accumulate())
    write(d, "acc_scaled", ACC_SCALED)
    write(d, "outer", OUTER)
    write(d, "loop_1", LOOP_1)
    write(d, "loop_2", LOOP_2)
    s = start_server(d, "--model-control-mode=explicit")
    yield s, d
    assert_clean_exit(s)


def test_bad_ensembles_are_refused_at_load(explicit):
    s, _ = explicit
    c = http_client(s)
    expect = {
        "bad_cycle": "the steps form a cycle: step 1 (model 'pass') -> step 0 (model 'pass') "
                     "-> step 1 (model 'pass')",
        "bad_missing": "step 1 (model 'pass') reads ensemble tensor 'nowhere' (for its input "
                       "'INPUT0'), which is neither an input of the ensemble nor written by "
                       "any step",
        "bad_unknown": "step 0 uses model 'no_such_model', which is not available",
        "bad_shape": "ensemble tensor 'X' (input of the ensemble) is TYPE_FP32 [-1,5], but step 0 "
                     "feeds it to input 'INPUT__0' of model 'scale', which takes TYPE_FP32 "
                     "[-1,4]",
        "loop_1": "circular dependency between ensembles: 'loop_1' -> 'loop_2' -> 'loop_1'",
    }
    for name, text in expect.items():
        with pytest.raises(InferenceServerException) as info:
            c.load_model(name)
        msg = info.value.message()
        assert text in msg, (name, msg)
        assert not c.is_model_ready(name)
    # Nothing else was disturbed; the good ensemble still loads and serves.
    c.load_model("chain")
    x, y = sample(1, 6)
    assert c.infer("chain", inputs(httpclient, x, y)).as_numpy("SUM") is not None


@pytest.mark.parametrize("proto", ["http", "grpc"])
def test_sequence_model_as_a_step(explicit, repo, proto):
    """The ensemble request's sequence id and flags reach its steps, as in
    Triton: seq_acc keeps a running sum per sequence, scale maps it. Two
    interleaved sequences; expected values from torch's scale on the sums
    computed here."""
    s, _ = explicit
    http_client(s).load_model("acc_scaled")
    mod, c = (httpclient, http_client(s)) if proto == "http" else (grpcclient, grpc_client(s))
    scale = torch.jit.load(os.path.join(repo, "scale", "1", "model.pt"))
    rng = np.random.default_rng(17)
    seqs = [7101, 7102] if proto == "http" else [7201, 7202]
    xs = {q: rng.standard_normal((3, 1, 4)).astype(np.float32) for q in seqs}

    def ask(x, **seq):
        i = mod.InferInput("X", [1, 4], "FP32")
        i.set_data_from_numpy(x)
        return c.infer("acc_scaled", [i], **seq)

    for k in range(3):
        for q in seqs:
            r = ask(xs[q][k], sequence_id=q, sequence_start=k == 0, sequence_end=k == 2)
            want = scale(torch.from_numpy(xs[q][:k + 1].sum(axis=0))).numpy()
            assert_close(r.as_numpy("OUT"), want)
    # Without a correlation id the sequence step refuses, named.
    with pytest.raises(InferenceServerException) as info:
        ask(xs[seqs[0]][0])
    msg = info.value.message()
    assert "step 0 (model 'seq_acc')" in msg, msg
    assert "must specify a non-zero or non-empty correlation ID" in msg, msg
    # A sequence that ended needs START again: the flags reached the step.
    with pytest.raises(InferenceServerException) as info:
        ask(xs[seqs[0]][0], sequence_id=seqs[0])
    assert "must specify the START flag" in info.value.message()


def test_explicit_load_brings_composing_models(explicit, repo):
    s, _ = explicit
    c = http_client(s)
    g = grpc_client(s)
    assert not c.is_model_ready("scale")
    g.load_model("chain")
    for name in ("chain", "scale", "addsub", "pass"):
        assert c.is_model_ready(name), name
    # Reloading a composing model keeps the ensemble serving.
    c.load_model("scale")
    x, y = sample(2, 7)
    res = c.infer("chain", inputs(httpclient, x, y))
    assert_close(res.as_numpy("SUM"), torch_chain(repo, x, y)[0])
    assert c.is_model_ready("chain")
    # unload_dependents takes the composing models along.
    c.unload_model("chain", unload_dependents=True)
    for name in ("chain", "scale", "addsub", "pass"):
        assert not c.is_model_ready(name), name


def test_unloading_a_composing_model_unloads_its_ensembles(explicit):
    """As tritonserver's dependency graph does: the ensemble that runs the
    unloaded model goes too (not ready, not served), and the log says why;
    loading the ensemble again loads the model with it."""
    s, _ = explicit
    c = http_client(s)
    c.load_model("chain")
    c.unload_model("pass")
    assert not c.is_model_ready("pass") and not c.is_model_ready("chain")
    assert "unloading ensemble 'chain': its step model 'pass' was unloaded" in s.log()
    x, y = sample(1, 8)
    with pytest.raises(InferenceServerException) as info:
        c.infer("chain", inputs(httpclient, x, y))
    assert "'chain'" in info.value.message(), info.value.message()
    c.load_model("chain")
    assert c.is_model_ready("pass")
    assert c.infer("chain", inputs(httpclient, x, y)).as_numpy("DIFF") is not None


def test_ensemble_of_an_ensemble(explicit, repo):
    """Loading `outer` loads `chain`, which loads its own composing models."""
    s, _ = explicit
    c = grpc_client(s)
    c.load_model("outer")
    for name in ("outer", "chain", "scale", "addsub", "pass"):
        assert c.is_model_ready(name), name
    x, y = sample(4, 9)
    ia = grpcclient.InferInput("A", [4, 4], "FP32")
    ia.set_data_from_numpy(x)
    ib = grpcclient.InferInput("B", [4, 4], "FP32")
    ib.set_data_from_numpy(y)
    res = c.infer("outer", [ia, ib])
    assert_close(res.as_numpy("S"), torch_chain(repo, x, y)[0])


def test_reloading_a_composing_model_keeps_the_ensemble_serving(explicit, repo):
    """Two clients call the ensemble without pause while `scale` is reloaded
    five times: every answer is right, none is an error."""
    s, _ = explicit
    c = http_client(s)
    c.load_model("chain")
    stop = threading.Event()
    errors, answers = [], [0]

    def client(seed):
        cc = http_client(s)
        i = 0
        while not stop.is_set():
            x, y = sample(1 + i % 3, seed * 1000 + i)
            try:
                res = cc.infer("chain", inputs(httpclient, x, y))
                assert_close(res.as_numpy("SUM"), torch_chain(repo, x, y)[0])
                answers[0] += 1
            except Exception as e:  # noqa: BLE001 - every failure is reported below
                errors.append(repr(e))
            i += 1

    threads = [threading.Thread(target=client, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    try:
        for _ in range(5):
            c.load_model("scale")
    finally:
        stop.set()
        for t in threads:
            t.join(TIMEOUT)
    assert not errors, errors[:3]
    assert answers[0] > 0
    assert c.is_model_ready("chain")


def test_shared_memory_inputs_and_outputs(start_server, repo):
    """The ensemble's inputs read from, and an output written to, system
    shared memory (the ensemble's own scheduler does both, as for any
    model); the steps in between never see the regions."""
    shm = need_module("tritonclient.utils.shared_memory")
    s = start_server(repo, "--allow-client-shm=true")
    c = http_client(s)
    key = "/ptstest_ens_%d_" % os.getpid()
    x, y = sample(2, 10)
    hin = shm.create_shared_memory_region("ens_in", key + "in", x.nbytes + y.nbytes)
    hout = shm.create_shared_memory_region("ens_out", key + "out", x.nbytes)
    try:
        shm.set_shared_memory_region(hin, [x, y])
        c.register_system_shared_memory("ens_in", key + "in", x.nbytes + y.nbytes)
        c.register_system_shared_memory("ens_out", key + "out", x.nbytes)
        ix = httpclient.InferInput("X", [2, 4], "FP32")
        ix.set_shared_memory("ens_in", x.nbytes)
        iy = httpclient.InferInput("Y", [2, 4], "FP32")
        iy.set_shared_memory("ens_in", y.nbytes, offset=x.nbytes)
        o = httpclient.InferRequestedOutput("SUM")
        o.set_shared_memory("ens_out", x.nbytes)
        res = c.infer("chain", [ix, iy], outputs=[o])
        assert res.get_output("SUM") == {"name": "SUM", "datatype": "FP32", "shape": [2, 4]}
        got = shm.get_contents_as_numpy(hout, np.float32, [2, 4])
        assert_close(got, torch_chain(repo, x, y)[0])
        c.unregister_system_shared_memory()
    finally:
        shm.destroy_shared_memory_region(hin)
        shm.destroy_shared_memory_region(hout)
    assert_clean_exit(s)


def test_more_concurrent_requests_than_running_slots(server, repo):
    """40 requests at once (16 ensemble requests run at a time; the rest
    wait in the ensemble's queue): every answer is its own request's."""
    c = grpc_client(server)
    answers = queue.Queue()
    expected = {}
    for i in range(40):
        x, y = sample(1 + i % 8, 300 + i)
        rid = "c-%d" % i
        expected[rid] = torch_chain(repo, x, y)
        c.async_infer("chain", inputs(grpcclient, x, y), request_id=rid,
                      callback=lambda result, error: answers.put((result, error)))
    for _ in range(40):
        result, error = answers.get(timeout=TIMEOUT)
        assert error is None, error
        rid = result.get_response().id
        assert_close(result.as_numpy("SUM"), expected[rid][0])
        assert_close(result.as_numpy("DIFF"), expected[rid][1])
        del expected[rid]
    assert not expected


SCALE_NB = SCALE.replace('"scale"', '"scale_nb"').replace("max_batch_size: 8", "max_batch_size: 0")
# A non-batching ensemble around the batching `scale`, and a batching one
# around the non-batching `scale_nb`: the same tensor on both sides of
# the batch dimension, which Triton's load check allows (the dims agree)
# and its scheduler bridges with a batch of 1.
FLAT = ensemble_config("flat", [("scale", "INPUT__0", "X", "OUTPUT__0", "OUT")]).replace(
    "max_batch_size: 8", "max_batch_size: 0")
BATCHED = ensemble_config("batched", [("scale_nb", "INPUT__0", "X", "OUTPUT__0", "OUT")])


def test_batching_and_non_batching_steps_share_tensors(start_server, tmp_path):
    d = str(tmp_path / "repo")
    write(d, "scale", SCALE, Scale())
    write(d, "scale_nb", SCALE_NB, Scale())
    write(d, "flat", FLAT)
    write(d, "batched", BATCHED)
    s = start_server(d)
    c = http_client(s)
    scale = torch.jit.load(os.path.join(d, "scale", "1", "model.pt"))
    x = sample(1, 11)[0][0]  # one row of four
    want = scale(torch.from_numpy(x)).numpy()
    # [4] into `scale` as [1, 4], its [1, 4] back out as [4]
    i = httpclient.InferInput("X", [4], "FP32")
    i.set_data_from_numpy(x)
    r = c.infer("flat", [i])
    assert r.as_numpy("OUT").shape == (4,)
    assert_close(r.as_numpy("OUT"), want)
    # [1, 4] into `scale_nb` as [4], its [4] back out as [1, 4]
    i = httpclient.InferInput("X", [1, 4], "FP32")
    i.set_data_from_numpy(x[None])
    r = c.infer("batched", [i])
    assert r.as_numpy("OUT").shape == (1, 4)
    assert_close(r.as_numpy("OUT"), want[None])
    # A batch of 2 is not one `scale_nb` input: refused, named
    i = httpclient.InferInput("X", [2, 4], "FP32")
    i.set_data_from_numpy(np.stack([x, x]))
    with pytest.raises(InferenceServerException) as info:
        c.infer("batched", [i])
    msg = info.value.message()
    assert "step 0 (model 'scale_nb')" in msg and "unexpected shape for input 'INPUT__0'" in msg, msg
    assert_clean_exit(s)
