"""Where torch runs: the device a name means on this machine."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bench.core.errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover
    import torch

DEVICES = ("auto", "cpu", "cuda")


def resolve_device(name: str) -> torch.device:
    """``auto`` -> ``cuda`` when torch sees a GPU, else ``cpu``; ``cpu`` / ``cuda`` as named.

    Raises:
        ConfigError: another name, or ``cuda`` where torch sees no CUDA GPU (one line).
    """
    import torch

    if name not in DEVICES:
        raise ConfigError(f"device {name!r} is not known; allowed: {', '.join(DEVICES)}")
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device 'cuda' requested but no CUDA GPU is available; use --device cpu or auto")
    return torch.device(name)
