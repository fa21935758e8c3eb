"""Reference architectures (the reference systems' models and our recipes'), registered by name in
``bench.core.catalog``; each factory takes ``(input_shape, num_classes)`` with ``input_shape = (C, H, W)`` and returns
an untrained module mapping ``(N, C, H, W)`` images to ``(N, K)`` logits (the autoencoder maps to ``(N, C·H·W)``)."""

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
    """``(N, C, H, W)`` -> ``(x − mean) / std`` with fixed public constants (no trainable parameters)."""

    def __init__(self, mean: float, std: float) -> None:
        super().__init__()
        self.mean, self.std = float(mean), float(std)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.mean) / self.std


def cnn_small(input_shape: tuple[int, ...], num_classes: int, activation: str = "relu",
              standardize: Sequence[float] | None = None) -> nn.Module:
    """The Opacus MNIST example CNN: Conv(16, 8×8, s2, p3), MaxPool(2, s1), Conv(32, 4×4, s2),
    MaxPool(2, s1), Linear(512→32), Linear(32→K). 26,010 parameters on 28×28 input.

    Args:
        input_shape, num_classes: ``(C, H, W)`` and the number of classes K.
        activation: ``relu``, or ``tanh``: Tramèr & Boneh's (ICLR 2021) CNN (tempered sigmoid, Papernot et al. 2021).
        standardize: ``(mean, std)``: pixels first mapped to (x − mean)/std (public constants); None: as given.
    Returns:
        The untrained CNN, ``(N, C, H, W)`` images to ``(N, K)`` logits."""
    act = _activation(activation)
    features = nn.Sequential(*([Standardize(*standardize)] if standardize else []),
                             nn.Conv2d(input_shape[0], 16, 8, stride=2, padding=3), act(), nn.MaxPool2d(2, 1),
                             nn.Conv2d(16, 32, 4, stride=2), act(), nn.MaxPool2d(2, 1), nn.Flatten())
    d = _flat_dim(features, input_shape)
    return nn.Sequential(features, nn.Linear(d, 32), act(), nn.Linear(32, num_classes))


def cnn_dpmix(input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    """The DPMix paper's CNN (Lee et al. 2019): Conv(32, 5×5) MaxPool 2, Conv(48, 5×5) MaxPool 2,
    FC 100, FC 100, FC K, ReLU throughout, no padding.

    Args:
        input_shape, num_classes: ``(C, H, W)`` (at least 16×16) and the number of classes K.
    Returns:
        The untrained CNN, ``(N, C, H, W)`` images to ``(N, K)`` logits."""
    features = nn.Sequential(nn.Conv2d(input_shape[0], 32, 5), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(32, 48, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten())
    d = _flat_dim(features, input_shape)
    return nn.Sequential(features, nn.Linear(d, 100), nn.ReLU(), nn.Linear(100, 100), nn.ReLU(),
                         nn.Linear(100, num_classes))


def resnet18_gn(input_shape: tuple[int, ...], num_classes: int, stem: str = "small") -> nn.Module:
    """torchvision ResNet-18 with GroupNorm(min(32, C), C) in place of BatchNorm (Opacus needs
    per-sample-independent layers) and K outputs. ``stem="small"``: a C-channel 3×3 stride-1 first conv and
    no max-pool (for 28×28 input); ``stem="imagenet"``: torchvision's own 7×7 stride-2 conv (made C-channel)
    and max-pool, as the ``dpsgd-resnet18`` source did (28×28 becomes 7×7 after the stem; ~16× cheaper).

    Args:
        input_shape, num_classes: ``(C, H, W)`` and the number of classes K.
        stem: ``small`` or ``imagenet``.
    Returns:
        The untrained ResNet-18, ``(N, C, H, W)`` images to ``(N, K)`` logits.
    Raises:
        ValueError: another ``stem``."""
    from torchvision.models import resnet18

    if stem not in ("small", "imagenet"):
        raise ValueError(f"resnet18-gn stem {stem!r} not in ('small', 'imagenet')")
    net = resnet18(num_classes=num_classes, norm_layer=lambda c: nn.GroupNorm(min(32, c), c))
    if stem == "small":
        net.conv1 = nn.Conv2d(input_shape[0], 64, 3, stride=1, padding=1, bias=False)
        net.maxpool = nn.Identity()
    else:
        net.conv1 = nn.Conv2d(input_shape[0], 64, 7, stride=2, padding=3, bias=False)
    return net


def mlp(input_shape: tuple[int, ...], num_classes: int, hidden: int | list[int] = 128) -> nn.Module:
    """Dense classifier: Flatten, then Linear(→h) ReLU for each width h of ``hidden`` (one int: one hidden layer),
    then Linear(→K). Used for 8×8 digits, for tabular records ``(1, 1, D)`` (widths from the profile's
    ``tabular_hidden``) and as the weight-noise system's classifier.

    Args:
        input_shape, num_classes: ``(C, H, W)`` (``(1, 1, D)`` for tabular records) and the number of classes K.
        hidden: the hidden layers' widths.
    Returns:
        The untrained MLP, ``(N, C, H, W)`` records to ``(N, K)`` logits.
    Raises:
        ValueError: no width, or a width that is not an integer >= 1."""
    widths = [hidden] if isinstance(hidden, int) else list(hidden)
    if not widths or any(isinstance(h, bool) or not isinstance(h, int) or h < 1 for h in widths):
        raise ValueError(f"mlp hidden = {hidden!r} must be an integer >= 1 or a non-empty list of them")
    layers: list[nn.Module] = [nn.Flatten()]
    d = math.prod(input_shape)
    for h in widths:
        layers += [nn.Linear(d, h), nn.ReLU()]
        d = h
    return nn.Sequential(*layers, nn.Linear(d, num_classes))


class WideBlock(nn.Module):
    """Pre-activation wide residual block (Zagoruyko & Komodakis 2016) with GroupNorm: GN-ReLU-Conv3×3(stride)-
    GN-ReLU-Conv3×3, plus the input (or a 1×1 strided conv of the activated input when the shape changes)."""

    def __init__(self, c_in: int, c_out: int, stride: int, groups: int) -> None:
        super().__init__()
        self.norm1 = nn.GroupNorm(min(groups, c_in), c_in)
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False)
        self.norm2 = nn.GroupNorm(min(groups, c_out), c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, stride=1, padding=1, bias=False)
        self.shortcut = (nn.Conv2d(c_in, c_out, 1, stride=stride, bias=False)
                         if stride != 1 or c_in != c_out else None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = torch.relu(self.norm1(x))
        out = self.conv2(torch.relu(self.norm2(self.conv1(a))))
        return out + (self.shortcut(a) if self.shortcut is not None else x)


def wide_resnet(input_shape: tuple[int, ...], num_classes: int, depth: int = 16, width: int = 4,
                groups: int = 16) -> nn.Module:
    """WRN-``depth``-``width`` (Zagoruyko & Komodakis 2016) with GroupNorm(``groups``) in place of BatchNorm, the
    DP-SGD CIFAR-10 model of De et al. 2022 (without their weight standardisation, which per-sample clipping here
    does not support): Conv3×3(16), three stages of (depth − 4)/6 wide blocks of 16·width, 32·width, 64·width
    channels (strides 1, 2, 2), GN-ReLU, global average pooling, Linear(→K). Any ``(C, H, W)`` input (at least 4×4:
    the average pooling adapts). 2.75 M parameters for WRN-16-4 on CIFAR-10.

    Args:
        input_shape, num_classes: ``(C, H, W)`` and the number of classes K.
        depth, width, groups: the depth 6n + 4 (n >= 1), the width multiplier and the GroupNorm groups.
    Returns:
        The untrained network, ``(N, C, H, W)`` images to ``(N, K)`` logits.
    Raises:
        ValueError: depth not 6n + 4."""
    if depth < 10 or (depth - 4) % 6:
        raise ValueError(f"wide_resnet depth = {depth} must be 6n + 4 with n >= 1 (10, 16, 22, 28, ...)")
    n = (depth - 4) // 6
    layers: list[nn.Module] = [nn.Conv2d(input_shape[0], 16, 3, padding=1, bias=False)]
    c = 16
    for stage, stride in zip((16 * width, 32 * width, 64 * width), (1, 2, 2), strict=True):
        for i in range(n):
            layers.append(WideBlock(c, stage, stride if i == 0 else 1, groups))
            c = stage
    layers += [nn.GroupNorm(min(groups, c), c), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
               nn.Linear(c, num_classes)]
    return nn.Sequential(*layers)


def wrn_16_4(input_shape: tuple[int, ...], num_classes: int, groups: int = 16) -> nn.Module:
    """WRN-16-4 with GroupNorm (De et al. 2022, CIFAR-10); see ``wide_resnet``."""
    return wide_resnet(input_shape, num_classes, depth=16, width=4, groups=groups)


def linear(input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    """Linear classifier on the flattened image: Linear(d→K). DPMix's ``class-means`` learner sets its weights in
    closed form (a nearest-class-mean classifier).

    Args:
        input_shape, num_classes: ``(C, H, W)`` and the number of classes K.
    Returns:
        ``Flatten, Linear``: ``(N, C, H, W)`` images to ``(N, K)`` logits."""
    return nn.Sequential(nn.Flatten(), nn.Linear(math.prod(input_shape), num_classes))


class Scattering(nn.Module):
    """Fixed (data-independent) 2-D wavelet scattering transform of Oyallon & Mallat, as used by Tramèr & Boneh
    (ICLR 2021, §3): ``(N, C, H, W)`` images -> ``(N, C·K, H/2^J, W/2^J)`` features, K = 1 + J·L + L²·J(J−1)/2
    (81 for J = 2, L = 8). Kymatio's filters are buffers, not parameters: nothing here is trained, so the
    transform costs no privacy. Raises ValueError when H or W is not a multiple of 2^J."""

    def __init__(self, input_shape: tuple[int, ...], J: int = 2, L: int = 8) -> None:
        super().__init__()
        # kymatio's 2-D torch front end, imported directly: ``kymatio.torch`` also loads the 3-D transform,
        # which imports ``scipy.special.sph_harm`` (removed in SciPy 1.17)
        from kymatio.scattering2d.frontend.torch_frontend import ScatteringTorch2D

        c, h, w = input_shape
        if h % 2**J or w % 2**J:
            raise ValueError(f"scattering with J = {J} needs H and W divisible by {2**J}; got {h}×{w}")
        self.transform = ScatteringTorch2D(J=J, shape=(h, w), L=L)
        self.out_shape = (c * (1 + J * L + L * L * J * (J - 1) // 2), h // 2**J, w // 2**J)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.device.type != "cpu" or (torch.is_grad_enabled() and x.requires_grad):  # a gradient needs the graph
            return self.transform(x.contiguous()).reshape(len(x), *self.out_shape)
        return _SCATTER_CACHE.features(self, x)


class _FeatureCache:
    """Scattering features of images already seen in this process, by image content (a BLAKE2b digest of each
    image's bytes) and transform (J, L, shape): the transform is fixed, so an image's features never change, and
    an attack that scores the same 20,000 images with every shadow and reference model computes them once. On CPU
    only (a GPU computes them faster than they hash); least recently used images go beyond ``max_images``."""

    def __init__(self, max_images: int = 50_000) -> None:
        from collections import OrderedDict

        self.max_images = max_images
        self._store: OrderedDict[tuple, torch.Tensor] = OrderedDict()

    @torch.no_grad()
    def features(self, module: Scattering, x: torch.Tensor) -> torch.Tensor:
        import hashlib

        x = x.detach().contiguous()
        rows = x.reshape(len(x), -1).numpy()
        tag = (module.transform.J, module.transform.L, tuple(x.shape[1:]), str(x.dtype))
        keys = [(tag, hashlib.blake2b(row.tobytes(), digest_size=16).digest()) for row in rows]
        out = torch.empty(len(x), *module.out_shape, dtype=x.dtype)
        missing = [i for i, k in enumerate(keys) if k not in self._store]
        if missing:
            idx = torch.tensor(missing)
            fresh = module.transform(x[idx]).reshape(len(idx), *module.out_shape)
            for i, f in zip(missing, fresh, strict=True):
                self._store[keys[i]] = f.clone()
        for i, k in enumerate(keys):
            out[i] = self._store[k]
            self._store.move_to_end(k)
        while len(self._store) > self.max_images:
            self._store.popitem(last=False)
        return out


_SCATTER_CACHE = _FeatureCache()


class FrozenFront(nn.Module):
    """``head(front(x))`` where ``front`` has no trainable parameters. Trainers that know this class (fast DP-SGD)
    compute ``front`` once over the training set and train ``head`` on the features; everything else (attacks,
    evaluation) sees one module from images to logits."""

    def __init__(self, front: nn.Module, head: nn.Module) -> None:
        super().__init__()
        if any(p.requires_grad for p in front.parameters()):
            raise ValueError("FrozenFront: the front has trainable parameters")
        self.front, self.head = front, head

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # no ``no_grad`` here: the front has no parameters, so autograd records it only when ``x`` requires a
        # gradient — as model inversion (MI-Face) needs
        return self.head(self.front(x))

    @torch.no_grad()
    def features(self, x: torch.Tensor, device: torch.device, batch_size: int = 1024) -> torch.Tensor:
        """``front`` applied to ``x (N, C, H, W)`` in chunks of ``batch_size`` on ``device``; returns the
        ``(N, ...)`` features on ``x``'s device."""
        return torch.cat([self.front(x[i : i + batch_size].to(device)).to(x.device)
                          for i in range(0, len(x), batch_size)])


def scatternet_linear(input_shape: tuple[int, ...], num_classes: int, groups: int = 27, J: int = 2) -> nn.Module:
    """Tramèr & Boneh's (ICLR 2021, §3) ScatterNet + linear classifier: the scattering transform (J = 2, L = 8;
    81 × 7 × 7 features on 28×28 input), GroupNorm(``groups``, channels) — a per-sample normalisation, so it
    needs no private statistics — and Linear(features→K). 39,700 trainable parameters on MNIST.

    Args:
        input_shape, num_classes: ``(C, H, W)``, H and W multiples of 2^J, and the number of classes K.
        groups, J: the GroupNorm groups (dividing the scattering channels) and the scattering scale.
    Returns:
        A ``FrozenFront``: ``(N, C, H, W)`` images to ``(N, K)`` logits, only the linear head trainable.
    Raises:
        ValueError: ``groups`` does not divide the channels, or H or W is not a multiple of 2^J."""
    front = Scattering(input_shape, J=J)
    channels = front.out_shape[0]
    if channels % groups:
        raise ValueError(f"scatternet-linear groups {groups} must divide the {channels} scattering channels")
    # GroupNorm without affine parameters is fixed too: part of the front, computed once with the features
    fixed = nn.Sequential(front, nn.GroupNorm(groups, channels, affine=False), nn.Flatten())
    return FrozenFront(fixed, nn.Linear(math.prod(front.out_shape), num_classes))


def autoencoder(input_shape: tuple[int, ...], num_classes: int = 0, code: int = 64) -> nn.Module:
    """Dense autoencoder of the weight-noise system: d→code (ReLU)→d (sigmoid), on flattened images;
    maps ``(N, C, H, W)`` to ``(N, C·H·W)`` reconstructions in [0, 1]."""
    d = math.prod(input_shape)
    return nn.Sequential(nn.Flatten(), nn.Linear(d, code), nn.ReLU(), nn.Linear(code, d), nn.Sigmoid())


def build_model(name: str, input_shape: tuple[int, ...], num_classes: int, **kwargs) -> nn.Module:
    """Build a registered model. Raises ValueError naming the known models for an unknown name."""
    return MODELS.get(name)(tuple(input_shape), num_classes, **kwargs)
