"""Writes the TorchScript files of the example repository (examples/models).

    .venv/bin/python examples/gen_models.py [REPOSITORY]

`make run` calls this before serving. The config.pbtxt files are committed;
the model.pt files are generated (and git-ignored) so the repository stays
small and every model is produced by the torch this host has.
"""
import os
import sys
from typing import List

import torch


class AddSub(torch.nn.Module):
    def forward(self, a, b):
        return a + b, a - b


class MlpClassifier(torch.nn.Module):
    """16 features -> 32 hidden (ReLU) -> 4 class probabilities."""

    def __init__(self):
        super().__init__()
        self.hidden = torch.nn.Linear(16, 32)
        self.classes = torch.nn.Linear(32, 4)

    def forward(self, features):
        return torch.softmax(self.classes(torch.relu(self.hidden(features))), dim=1)


class Standardize(torch.nn.Module):
    """(x - mean) / std per feature, with fixed statistics of 16 features."""

    def __init__(self):
        super().__init__()
        self.register_buffer("mean", torch.linspace(-1.0, 1.0, 16))
        self.register_buffer("std", torch.linspace(0.5, 2.0, 16))

    def forward(self, x):
        return (x - self.mean) / self.std


class TextUpper(torch.nn.Module):
    def forward(self, text: List[str]) -> List[str]:
        return [s.upper() for s in text]


class Accumulator(torch.nn.Module):
    """A sequence model with implicit state (docs/sequence-batching.md): the
    server passes the sequence's running sum as `state` (zeros at START) and
    keeps the second result as the next one."""

    def forward(self, x, start, state):
        total = state + x
        return total, total


def save(repo, name, module):
    version_dir = os.path.join(repo, name, "1")
    os.makedirs(version_dir, exist_ok=True)
    path = os.path.join(version_dir, "model.pt")
    torch.jit.script(module.eval()).save(path)
    print("wrote", path)


def main(argv):
    repo = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                       "models")
    torch.manual_seed(0)  # the same weights on every host
    save(repo, "add_sub", AddSub())
    save(repo, "mlp_classifier", MlpClassifier())
    save(repo, "text_upper", TextUpper())
    save(repo, "accumulator", Accumulator())
    save(repo, "standardize", Standardize())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
