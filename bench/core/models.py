"""The plain reference architectures (the reference systems' small models and our recipes').

Convolutional nets, dense nets, a linear classifier, the weight-noise system's autoencoder and ``FrozenFront`` (a fixed
front before a trained head); and ``build_model``, which builds any registered architecture by name
(``bench.core.catalog``; the residual nets are in ``bench.core.resnets``, the scattering network in
``bench.core.scatternet``). Each factory takes ``(input_shape, num_classes)`` with ``input_shape = (C, H, W)`` and
returns an untrained module mapping ``(N, C, H, W)`` images to ``(N, K)`` logits (the autoencoder maps to ``(N,
C·H·W)``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn

from bench.core.catalog import MODELS


def _flat_dim(features: nn.Module, input_shape: tuple[int, ...]) -> int:
    with torch.no_grad():
        return int(features(torch.zeros(1, *input_shape)).flatten(1).shape[1])


def _activation(name: str) -> type[nn.Module]:
    return {"relu": nn.ReLU, "tanh": nn.Tanh}[name]


class Standardize(nn.Module):
    """``(N, C, H, W)`` -> ``(x − mean) / std`` with fixed public constants (no trainable parameters).

    Args:
        mean: the constant subtracted (pixel units, e.g. a public data set's mean).
        std: the constant divided by (pixel units, > 0).
    """

    def __init__(self, mean: float, std: float) -> None:
        super().__init__()
        self.mean, self.std = float(mean), float(std)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``(N, C, H, W)`` images -> ``(x − mean) / std``, same shape."""
        return (x - self.mean) / self.std


def cnn_small(input_shape: tuple[int, ...], num_classes: int, activation: str = "relu",
              standardize: Sequence[float] | None = None) -> nn.Module:
    """The Opacus MNIST CNN: Conv(16, 8×8, s2, p3), MaxPool(2, s1), Conv(32, 4×4, s2), MaxPool(2, s1), FC 32, FC K.

    ``activation="tanh"``: Tramèr & Boneh's (ICLR 2021) CNN (tempered sigmoid, Papernot et al. 2021);
    ``standardize=(mean, std)`` first maps pixels to (x − mean)/std (public constants).
    """
    act = _activation(activation)
    features = nn.Sequential(*([Standardize(*standardize)] if standardize else []),
                             nn.Conv2d(input_shape[0], 16, 8, stride=2, padding=3), act(), nn.MaxPool2d(2, 1),
                             nn.Conv2d(16, 32, 4, stride=2), act(), nn.MaxPool2d(2, 1), nn.Flatten())
    d = _flat_dim(features, input_shape)
    return nn.Sequential(features, nn.Linear(d, 32), act(), nn.Linear(32, num_classes))


def cnn_dpmix(input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    """The DPMix paper's CNN (Lee et al. 2019); images at least 16×16.

    Conv(32, 5×5) MaxPool 2, Conv(48, 5×5) MaxPool 2, FC 100, FC 100, FC K, ReLU throughout, no padding.
    """
    features = nn.Sequential(nn.Conv2d(input_shape[0], 32, 5), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(32, 48, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten())
    d = _flat_dim(features, input_shape)
    return nn.Sequential(features, nn.Linear(d, 100), nn.ReLU(), nn.Linear(100, 100), nn.ReLU(),
                         nn.Linear(100, num_classes))


def mlp(input_shape: tuple[int, ...], num_classes: int, hidden: int | list[int] = 128) -> nn.Module:
    """Dense classifier: Flatten, Linear(→h) ReLU for each width h of ``hidden`` (an int: one layer), Linear(→K).

    ``input_shape`` is ``(1, 1, D)`` for tabular records.

    Raises:
        ValueError: no width, or a width that is not an integer >= 1.
    """
    widths = [hidden] if isinstance(hidden, int) else list(hidden)
    if not widths or any(isinstance(h, bool) or not isinstance(h, int) or h < 1 for h in widths):
        raise ValueError(f"mlp hidden = {hidden!r} must be an integer >= 1 or a non-empty list of them")
    layers: list[nn.Module] = [nn.Flatten()]
    d = math.prod(input_shape)
    for h in widths:
        layers += [nn.Linear(d, h), nn.ReLU()]
        d = h
    return nn.Sequential(*layers, nn.Linear(d, num_classes))


def linear(input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    """Linear classifier on the flattened image: Flatten, Linear(C·H·W→K)."""
    return nn.Sequential(nn.Flatten(), nn.Linear(math.prod(input_shape), num_classes))


class FrozenFront(nn.Module):
    """``head(front(x))`` where ``front`` has no trainable parameters.

    Trainers that know this class (fast DP-SGD) compute ``front`` once over the training set and train ``head`` on the
    features; everything else (attacks, evaluation) sees one module from images to logits.

    Args:
        front: the fixed part (no trainable parameters), ``(N, C, H, W)`` images to features.
        head: the trained part, features to ``(N, K)`` logits.

    Raises:
        ValueError: ``front`` has a trainable parameter.
    """

    def __init__(self, front: nn.Module, head: nn.Module) -> None:
        super().__init__()
        if any(p.requires_grad for p in front.parameters()):
            raise ValueError("FrozenFront: the front has trainable parameters")
        self.front, self.head = front, head

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``(N, C, H, W)`` images -> ``(N, K)`` logits, ``head(front(x))``."""
        # no ``no_grad`` here: the front has no parameters, so autograd records it only when ``x`` requires a
        # gradient — as model inversion (MI-Face) needs
        return self.head(self.front(x))

    @torch.no_grad()
    def features(self, x: torch.Tensor, device: torch.device, batch_size: int = 1024) -> torch.Tensor:
        """``front`` on ``(N, C, H, W)`` images, ``batch_size`` at a time on ``device``: ``(N, ...)`` on x's device."""
        return torch.cat([self.front(x[i : i + batch_size].to(device)).to(x.device)
                          for i in range(0, len(x), batch_size)])



def autoencoder(input_shape: tuple[int, ...], num_classes: int = 0, code: int = 64) -> nn.Module:
    """The weight-noise system's dense autoencoder, d→code (ReLU)→d (sigmoid), d = C·H·W; ignores ``num_classes``."""
    d = math.prod(input_shape)
    return nn.Sequential(nn.Flatten(), nn.Linear(d, code), nn.ReLU(), nn.Linear(code, d), nn.Sigmoid())


def build_model(name: str, input_shape: tuple[int, ...], num_classes: int, **kwargs) -> nn.Module:
    """The untrained model registered as ``name``, ``kwargs`` its factory's settings (ValueError if unknown)."""
    return MODELS.get(name)(tuple(input_shape), num_classes, **kwargs)

