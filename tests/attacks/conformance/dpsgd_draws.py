"""Shared patches of DP-SGD's noise draw (``torch.normal`` as ``mechanisms.dpsgd.fast.noisy_step`` calls it): the
mechanism's own module sees a ``torch`` whose ``normal`` is broken in one way, everything else torch's own. The
accountant still certifies the claimed σ. For the conformance tests of ``test_dpsgd_conformance.py``, which install one
with ``monkeypatch`` (the zoo's planted bugs, applied to whole runs, are ``bench/zoo/bugs``)."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

Draw = Callable[..., torch.Tensor]


class _Torch:
    """``torch`` with ``normal`` replaced by ``draw(original, mean=, std=, size=, generator=, **kw)``."""

    def __init__(self, draw: Draw) -> None:
        self._draw = draw

    def __getattr__(self, name: str):
        return getattr(torch, name)

    def normal(self, *args, **kwargs) -> torch.Tensor:
        return self._draw(torch.normal, *args, **kwargs)


def broken_torch(draw: Draw) -> _Torch:
    """The patched ``torch`` for ``mechanisms.dpsgd.fast`` (install it with ``fast.torch = broken_torch(...)``)."""
    return _Torch(draw)


def no_noise_in(shape: tuple[int, ...]) -> Draw:
    """No noise in the parameter tensor(s) of ``shape``; the others as drawn."""
    def draw(normal, *args, size, **kwargs):
        out = normal(*args, size=size, **kwargs)
        return torch.zeros_like(out) if tuple(size) == tuple(shape) else out
    return draw


def reused() -> Draw:
    """The first step's noise drawn again at every step (a generator re-seeded each step)."""
    first: dict[tuple[int, ...], torch.Tensor] = {}

    def draw(normal, *args, size, **kwargs):
        key = tuple(size)
        if key not in first:
            first[key] = normal(*args, size=size, **kwargs)
        return first[key].clone()
    return draw


def laplace() -> Draw:
    """Laplace noise of the certified variance (scale b = std/√2), from the same generator."""
    def draw(normal, *, mean, std, size, generator=None, device=None, dtype=None):
        u = torch.rand(size, generator=generator, device=device, dtype=dtype) - 0.5
        return mean - std / math.sqrt(2) * torch.sign(u) * torch.log1p(-2 * u.abs())
    return draw
