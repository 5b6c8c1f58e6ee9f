"""The `x * k + 0.5` TorchScript model that the model-management tests load,
replace and reload: each k is a distinct version whose answers the tests
compute themselves (torch eagerly, or by hand)."""

import io

import torch


class Scale(torch.nn.Module):
    def __init__(self, k):
        super().__init__()
        self.k = k

    def forward(self, x):
        return x * self.k + 0.5


def scripted_bytes(k):
    """Scale(k) as the bytes of a TorchScript file (a repository's model.pt)."""
    buf = io.BytesIO()
    torch.jit.save(torch.jit.script(Scale(k)), buf)
    return buf.getvalue()
