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
        """Standardise ``x``.

        Args:
            x: ``(N, C, H, W)`` images.

        Returns:
            ``(N, C, H, W)``: ``(x − mean) / std``.
        """
        return (x - self.mean) / self.std


def cnn_small(input_shape: tuple[int, ...], num_classes: int, activation: str = "relu",
              standardize: Sequence[float] | None = None) -> nn.Module:
    """The Opacus MNIST example CNN.

    Conv(16, 8×8, s2, p3), MaxPool(2, s1), Conv(32, 4×4, s2), MaxPool(2, s1), Linear(512→32), Linear(32→K). 26,010
    parameters on 28×28 input.

    Args:
        input_shape: ``(C, H, W)``.
        num_classes: the number of classes K.
        activation: ``relu``, or ``tanh``: Tramèr & Boneh's (ICLR 2021) CNN (tempered sigmoid, Papernot et al. 2021).
        standardize: ``(mean, std)``: pixels first mapped to (x − mean)/std (public constants); None: as given.

    Returns:
        The untrained CNN, ``(N, C, H, W)`` images to ``(N, K)`` logits.
    """
    act = _activation(activation)
    features = nn.Sequential(*([Standardize(*standardize)] if standardize else []),
                             nn.Conv2d(input_shape[0], 16, 8, stride=2, padding=3), act(), nn.MaxPool2d(2, 1),
                             nn.Conv2d(16, 32, 4, stride=2), act(), nn.MaxPool2d(2, 1), nn.Flatten())
    d = _flat_dim(features, input_shape)
    return nn.Sequential(features, nn.Linear(d, 32), act(), nn.Linear(32, num_classes))


def cnn_dpmix(input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    """The DPMix paper's CNN (Lee et al. 2019).

    Conv(32, 5×5) MaxPool 2, Conv(48, 5×5) MaxPool 2, FC 100, FC 100, FC K, ReLU throughout, no padding.

    Args:
        input_shape: ``(C, H, W)`` (at least 16×16).
        num_classes: the number of classes K.

    Returns:
        The untrained CNN, ``(N, C, H, W)`` images to ``(N, K)`` logits.
    """
    features = nn.Sequential(nn.Conv2d(input_shape[0], 32, 5), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(32, 48, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten())
    d = _flat_dim(features, input_shape)
    return nn.Sequential(features, nn.Linear(d, 100), nn.ReLU(), nn.Linear(100, 100), nn.ReLU(),
                         nn.Linear(100, num_classes))


def mlp(input_shape: tuple[int, ...], num_classes: int, hidden: int | list[int] = 128) -> nn.Module:
    """Dense classifier: Flatten, then Linear(→h) ReLU for each width h of ``hidden`` (one int: one hidden layer).

    Then Linear(→K). Used for 8×8 digits, for tabular records ``(1, 1, D)`` (widths from the profile's
    ``tabular_hidden``) and as the weight-noise system's classifier.

    Args:
        input_shape: ``(C, H, W)`` (``(1, 1, D)`` for tabular records).
        num_classes: the number of classes K.
        hidden: the hidden layers' widths.

    Returns:
        The untrained MLP, ``(N, C, H, W)`` records to ``(N, K)`` logits.

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
    """Linear classifier on the flattened image: Linear(d→K).

    DPMix's ``class-means`` learner sets its weights in closed form (a nearest-class-mean classifier).

    Args:
        input_shape: ``(C, H, W)``.
        num_classes: the number of classes K.

    Returns:
        ``Flatten, Linear``: ``(N, C, H, W)`` images to ``(N, K)`` logits.
    """
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
        """``head(front(x))``.

        Args:
            x: ``(N, C, H, W)`` images.

        Returns:
            ``(N, K)`` logits.
        """
        # no ``no_grad`` here: the front has no parameters, so autograd records it only when ``x`` requires a
        # gradient — as model inversion (MI-Face) needs
        return self.head(self.front(x))

    @torch.no_grad()
    def features(self, x: torch.Tensor, device: torch.device, batch_size: int = 1024) -> torch.Tensor:
        """``front`` applied to ``x`` in chunks on ``device`` (what fast DP-SGD trains ``head`` on).

        Args:
            x: ``(N, C, H, W)`` images.
            device: where ``front`` runs.
            batch_size: the images per chunk.

        Returns:
            The ``(N, ...)`` features, on ``x``'s device.
        """
        return torch.cat([self.front(x[i : i + batch_size].to(device)).to(x.device)
                          for i in range(0, len(x), batch_size)])



def autoencoder(input_shape: tuple[int, ...], num_classes: int = 0, code: int = 64) -> nn.Module:
    """Dense autoencoder of the weight-noise system: d→code (ReLU)→d (sigmoid), on flattened images.

    Args:
        input_shape: ``(C, H, W)``; d = C·H·W.
        num_classes: unused (the factories' common signature).
        code: the bottleneck's width.

    Returns:
        The untrained autoencoder, ``(N, C, H, W)`` images to ``(N, C·H·W)`` reconstructions in [0, 1].
    """
    d = math.prod(input_shape)
    return nn.Sequential(nn.Flatten(), nn.Linear(d, code), nn.ReLU(), nn.Linear(code, d), nn.Sigmoid())


def build_model(name: str, input_shape: tuple[int, ...], num_classes: int, **kwargs) -> nn.Module:
    """Build a registered model (``bench.core.catalog.MODELS``).

    Args:
        name: the registered model name (e.g. ``cnn-small``).
        input_shape: ``(C, H, W)`` of the images (``(1, 1, D)`` for tabular records).
        num_classes: the number of classes K.
        **kwargs: the factory's own settings (e.g. ``hidden`` for ``mlp``).

    Returns:
        The untrained module, ``(N, C, H, W)`` inputs to ``(N, K)`` logits (the autoencoder: ``(N, C·H·W)``).

    Raises:
        ValueError: an unknown name (naming the known models), or a setting the factory refuses.
    """
    return MODELS.get(name)(tuple(input_shape), num_classes, **kwargs)

