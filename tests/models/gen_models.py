"""Writes a model repository of TorchScript test models for ptserve.

    .venv/bin/python tests/models/gen_models.py OUTDIR [MODEL ...]

Each model gets OUTDIR/<name>/config.pbtxt and OUTDIR/<name>/1/model.pt;
with MODEL names, only those are written. Models are scripted with the
interpreter's torch (the project venv's 2.13 in CI; the GPU host's own
torch there), the same release as the LibTorch ptserve links. Tests compute expected values by torch.jit.load-ing the same
model.pt, independently of ptserve.
"""
import os
import sys
from typing import Dict, List, Optional, Tuple

import torch

# config type suffix -> torch dtype, for the add_sub_<T> family.
ADD_SUB_TYPES = {
    "bool": torch.bool,
    "uint8": torch.uint8,
    "int8": torch.int8,
    "int16": torch.int16,
    "int32": torch.int32,
    "int64": torch.int64,
    "fp16": torch.float16,
    "fp32": torch.float32,
    "fp64": torch.float64,
    "bf16": torch.bfloat16,
}


class AddSub(torch.nn.Module):
    """OUTPUT0 = a + b, OUTPUT1 = a - b (the classic Triton add_sub)."""

    def forward(self, a, b):
        return a + b, a - b


class OrXor(torch.nn.Module):
    """add_sub for BOOL: '+' is logical or, '-' is logical xor (torch has no bool '-')."""

    def forward(self, a, b):
        return torch.logical_or(a, b), torch.logical_xor(a, b)


class Mlp(torch.nn.Module):
    def __init__(self, n_in=16, hidden=32, n_out=4):
        super().__init__()
        self.fc1 = torch.nn.Linear(n_in, hidden)
        self.fc2 = torch.nn.Linear(hidden, n_out)

    def forward(self, x):
        return torch.softmax(self.fc2(torch.relu(self.fc1(x))), dim=1)


class Upper(torch.nn.Module):
    def forward(self, text: List[str]) -> List[str]:
        return [s.upper() for s in text]


class TextGen(torch.nn.Module):
    """A text model's interface in miniature (the generate extension's
    case): text in, at most max_tokens of its words out, upper-cased, and
    how many words that was."""
    def forward(self, text_input: List[str],
                max_tokens: torch.Tensor) -> Tuple[List[str], torch.Tensor]:
        n = int(max_tokens.reshape(-1)[0])
        words = text_input[0].upper().split()[:n]
        return [" ".join(words)], torch.tensor([len(words)], dtype=torch.int64)


class UpperFlip(torch.nn.Module):
    def forward(self, a: List[str], b: List[str],
                c: List[str]) -> Tuple[List[str], List[str], List[str]]:
        return [s.upper() for s in a], b, c


class DropFirst(torch.nn.Module):
    def forward(self, text: List[str]) -> List[str]:
        return text[1:]


class FwdNames(torch.nn.Module):
    def forward(self, x, y):
        return x * 2 + y


class DictOut(torch.nn.Module):
    def forward(self, a, b) -> Dict[str, torch.Tensor]:
        return {"sum": a + b, "prod": a * b}


class TupleOut(torch.nn.Module):
    def forward(self, a, b):
        return a + b, a - b


class ListOut(torch.nn.Module):
    def forward(self, a) -> List[torch.Tensor]:
        return [a * 2, a * 3]


class DictIn(torch.nn.Module):
    def forward(self, inputs: Dict[str, torch.Tensor]):
        return inputs["a"] + 10 * inputs["b"]


class NoBatch(torch.nn.Module):
    def forward(self, x):
        return x * 3, x.sum(dim=1)


class Reshaped(torch.nn.Module):
    """Position-dependent, so a wrong reshape shows in the result."""

    def forward(self, x):
        return torch.cumsum(x, dim=1)


class Threads(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.arange(64, dtype=torch.float32).reshape(8, 8) / 64)

    def forward(self, x):
        return torch.matmul(x, self.weight)


class Identity(torch.nn.Module):
    """Returns its input itself and a view of it: ptserve must not hand out
    request memory as output memory."""

    def forward(self, x):
        return x, x[:, 1:]


class OptionalIn(torch.nn.Module):
    def forward(self, x, bias: Optional[torch.Tensor] = None):
        if bias is None:
            return x
        return x + bias


class Scalar(torch.nn.Module):
    def forward(self, x):
        return x.sum()


class Stateful(torch.nn.Module):
    """A parameter in a submodule, the same parameter under a second name,
    and a buffer that forward() changes in place: whatever ptserve does to
    a module's tensors must keep them shared and writable. Call k (from 1)
    returns (W + k) x + b + k, W = [[1, 2], [3, 4]], b = [0.5, -0.5]."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(2, 2)
        with torch.no_grad():
            self.lin.weight.copy_(torch.tensor([[1.0, 2.0], [3.0, 4.0]]))
            self.lin.bias.copy_(torch.tensor([0.5, -0.5]))
        self.tied = self.lin.weight
        self.register_buffer("calls", torch.zeros(1))

    def forward(self, x):
        self.calls.add_(1)
        self.tied.add_(1)
        return self.lin(x) + self.calls


class Cast(torch.nn.Module):
    def forward(self, x):
        return x * 2


def tensor_pbtxt(name, dtype, dims, reshape=None, optional=False):
    lines = ["  {", '    name: "%s"' % name, "    data_type: %s" % dtype,
             "    dims: [ %s ]" % ", ".join(str(d) for d in dims)]
    if optional:
        lines.append("    optional: true")
    if reshape is not None:
        lines.append("    reshape: { shape: [ %s ] }" % ", ".join(str(d) for d in reshape))
    lines.append("  }")
    return "\n".join(lines)


def config_pbtxt(name, max_batch_size, inputs, outputs, extra=""):
    """inputs/outputs: lists of (name, TYPE_x, dims[, reshape[, optional]])."""
    text = ['name: "%s"' % name, 'backend: "pytorch"', "max_batch_size: %d" % max_batch_size]
    text.append("input [\n%s\n]" % ",\n".join(tensor_pbtxt(*t) for t in inputs))
    text.append("output [\n%s\n]" % ",\n".join(tensor_pbtxt(*t) for t in outputs))
    text.append("instance_group [ { count: 1, kind: KIND_CPU } ]")
    if extra:
        text.append(extra)
    return "\n".join(text) + "\n"


def write_model(outdir, name, config, module=None, raw=None):
    d = os.path.join(outdir, name, "1")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(outdir, name, "config.pbtxt"), "w") as f:
        f.write(config)
    path = os.path.join(d, "model.pt")
    if raw is not None:
        with open(path, "wb") as f:
            f.write(raw)
    else:
        torch.jit.script(module.eval()).save(path)


def models():
    """name -> (config text, module or None, raw bytes or None)."""
    out = {}
    for suffix, dtype in ADD_SUB_TYPES.items():
        t = "TYPE_" + suffix.upper()
        name = "add_sub_" + suffix
        out[name] = (config_pbtxt(name, 8, [("INPUT0", t, [4]), ("INPUT1", t, [4])],
                                  [("OUTPUT0", t, [4]), ("OUTPUT1", t, [4])]),
                     OrXor() if dtype == torch.bool else AddSub(), None)

    torch.manual_seed(0)
    out["mlp"] = (config_pbtxt("mlp", 8, [("INPUT__0", "TYPE_FP32", [16])],
                               [("OUTPUT__0", "TYPE_FP32", [4])]), Mlp(), None)
    out["strings"] = (config_pbtxt("strings", 0, [("INPUT0", "TYPE_STRING", [-1])],
                                   [("OUTPUT0", "TYPE_STRING", [-1])]), Upper(), None)
    out["text_gen"] = (config_pbtxt("text_gen", 0, [("text_input", "TYPE_STRING", [1]),
                                                    ("max_tokens", "TYPE_INT32", [1])],
                                    [("text_output", "TYPE_STRING", [1]),
                                     ("token_count", "TYPE_INT64", [1])]), TextGen(), None)
    # Strings in more than one dimension: PyTorch sees one flat List[str].
    out["strings_batched"] = (config_pbtxt("strings_batched", 8,
                                           [("INPUT0", "TYPE_STRING", [-1])],
                                           [("OUTPUT0", "TYPE_STRING", [-1])]), Upper(), None)
    out["strings_grid"] = (config_pbtxt("strings_grid", 0,
                                        [("A", "TYPE_STRING", [-1, -1]),
                                         ("B", "TYPE_STRING", [-1, -1]),
                                         ("C", "TYPE_STRING", [2, -1])],
                                        [("UA", "TYPE_STRING", [-1, -1]),
                                         ("SAME_B", "TYPE_STRING", [-1, -1]),
                                         ("SAME_C", "TYPE_STRING", [2, -1])]), UpperFlip(), None)
    out["strings_drop"] = (config_pbtxt("strings_drop", 8, [("INPUT0", "TYPE_STRING", [-1])],
                                        [("OUTPUT0", "TYPE_STRING", [-1])]), DropFirst(), None)
    # Listed y before x: forward-argument matching must put them back.
    out["fwd_names"] = (config_pbtxt("fwd_names", 8, [("y", "TYPE_FP32", [4]),
                                                      ("x", "TYPE_FP32", [4])],
                                     [("OUTPUT__0", "TYPE_FP32", [4])]), FwdNames(), None)
    # Outputs listed in the other order than the dict: matched by key.
    out["dict_out"] = (config_pbtxt("dict_out", 8, [("INPUT__0", "TYPE_FP32", [4]),
                                                    ("INPUT__1", "TYPE_FP32", [4])],
                                    [("prod", "TYPE_FP32", [4]), ("sum", "TYPE_FP32", [4])]),
                       DictOut(), None)
    # Outputs listed out of index order: matched by __<index>.
    out["tuple_out"] = (config_pbtxt("tuple_out", 8, [("INPUT__0", "TYPE_INT32", [4]),
                                                      ("INPUT__1", "TYPE_INT32", [4])],
                                     [("OUT__1", "TYPE_INT32", [4]), ("OUT__0", "TYPE_INT32", [4])]),
                        TupleOut(), None)
    out["list_out"] = (config_pbtxt("list_out", 8, [("INPUT__0", "TYPE_INT64", [3])],
                                    [("OUTPUT__0", "TYPE_INT64", [3]),
                                     ("OUTPUT__1", "TYPE_INT64", [3])]), ListOut(), None)
    out["dict_in"] = (config_pbtxt("dict_in", 8, [("b", "TYPE_FP32", [2]), ("a", "TYPE_FP32", [2])],
                                   [("OUTPUT__0", "TYPE_FP32", [2])]), DictIn(), None)
    out["no_batch"] = (config_pbtxt("no_batch", 0, [("INPUT__0", "TYPE_FP32", [-1, 3])],
                                    [("OUTPUT__0", "TYPE_FP32", [-1, 3]),
                                     ("OUTPUT__1", "TYPE_FP32", [-1])]), NoBatch(), None)
    out["reshaped"] = (config_pbtxt("reshaped", 8, [("INPUT__0", "TYPE_FP32", [2, 3], [6])],
                                    [("OUTPUT__0", "TYPE_FP32", [2, 3], [6])]), Reshaped(), None)
    out["threads"] = (config_pbtxt(
        "threads", 8, [("INPUT__0", "TYPE_FP32", [8])], [("OUTPUT__0", "TYPE_FP32", [8])],
        'parameters: { key: "INTRA_OP_THREAD_COUNT" value: { string_value: "1" } }\n'
        'parameters: { key: "INFERENCE_MODE" value: { string_value: "false" } }'),
        Threads(), None)
    out["identity"] = (config_pbtxt("identity", 8, [("INPUT__0", "TYPE_INT32", [4])],
                                    [("OUTPUT__0", "TYPE_INT32", [4]),
                                     ("OUTPUT__1", "TYPE_INT32", [3])]), Identity(), None)
    out["optional_in"] = (config_pbtxt("optional_in", 8,
                                       [("INPUT__0", "TYPE_FP32", [4]),
                                        ("BIAS__1", "TYPE_FP32", [4], None, True)],
                                       [("OUTPUT__0", "TYPE_FP32", [4])]), OptionalIn(), None)
    out["scalar_out"] = (config_pbtxt("scalar_out", 0, [("INPUT__0", "TYPE_FP32", [-1])],
                                      [("OUTPUT__0", "TYPE_FP32", [1])]), Scalar(), None)
    out["stateful"] = (config_pbtxt("stateful", 8, [("INPUT__0", "TYPE_FP32", [2])],
                                    [("OUTPUT__0", "TYPE_FP32", [2])]), Stateful(), None)
    # The config says INT32, the model returns FP32: an error at inference.
    out["wrong_dtype"] = (config_pbtxt("wrong_dtype", 8, [("INPUT__0", "TYPE_FP32", [4])],
                                       [("OUTPUT__0", "TYPE_INT32", [4])]), Cast(), None)
    out["bad_file"] = (config_pbtxt("bad_file", 8, [("INPUT__0", "TYPE_FP32", [4])],
                                    [("OUTPUT__0", "TYPE_FP32", [4])]),
                       None, b"this is not a TorchScript archive\n" * 8)
    # forward() takes two arguments, the config lists one input.
    out["wrong_arity"] = (config_pbtxt("wrong_arity", 8, [("INPUT__0", "TYPE_FP32", [4])],
                                       [("OUTPUT__0", "TYPE_FP32", [4])]), FwdNames(), None)
    return out


def main(argv):
    if len(argv) < 2:
        sys.stderr.write("usage: %s OUTDIR [MODEL ...]\n" % argv[0])
        return 2
    outdir = argv[1]
    wanted = set(argv[2:])
    all_models = models()
    unknown = wanted - set(all_models)
    if unknown:
        sys.stderr.write("unknown model(s): %s\n" % ", ".join(sorted(unknown)))
        return 2
    for name, (config, module, raw) in all_models.items():
        if not wanted or name in wanted:
            write_model(outdir, name, config, module, raw)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
