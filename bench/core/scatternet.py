"""The scattering network of Tramèr & Boneh (ICLR 2021, §3).

A fixed wavelet scattering transform (Oyallon & Mallat) in front of a trainable linear head, as a ``FrozenFront`` whose
front fast DP-SGD computes once. Registered by name in ``bench.core.catalog`` (``scatternet-linear``): ``(N, C, H, W)``
images to ``(N, K)`` logits.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from bench.core.models import FrozenFront


class Scattering(nn.Module):
    """Fixed (data-independent) 2-D wavelet scattering transform of Oyallon & Mallat.

    As used by Tramèr & Boneh (ICLR 2021, §3): ``(N, C, H, W)`` images -> ``(N, C·K, H/2^J, W/2^J)`` features, K = 1 +
    J·L + L²·J(J−1)/2 (81 for J = 2, L = 8). Kymatio's filters are buffers, not parameters: nothing here is trained, so
    the transform costs no privacy.

    Args:
        input_shape: ``(C, H, W)``, H and W multiples of 2^J.
        J: the scattering scale (the features are 2^J times smaller in H and W).
        L: the number of wavelet orientations.

    Raises:
        ValueError: H or W is not a multiple of 2^J.
    """

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
        """``(N, C, H, W)`` images -> ``(N, *out_shape)`` features (on CPU without a gradient: cached by content)."""
        if x.device.type != "cpu" or (torch.is_grad_enabled() and x.requires_grad):  # a gradient needs the graph
            return self.transform(x.contiguous()).reshape(len(x), *self.out_shape)
        return _SCATTER_CACHE.features(self, x)


class _FeatureCache:
    """Scattering features of images already seen in this process.

    By image content (a BLAKE2b digest of each image's bytes) and transform (J, L, shape): the transform is fixed, so an
    image's features never change, and an attack that scores the same 20,000 images with every shadow and reference
    model computes them once. On CPU only (a GPU computes them faster than they hash); least recently used images go
    beyond ``max_images``.
    """

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


def scatternet_linear(input_shape: tuple[int, ...], num_classes: int, groups: int = 27, J: int = 2) -> nn.Module:
    """Tramèr & Boneh's (ICLR 2021, §3) ScatterNet + linear classifier, a ``FrozenFront`` (only the head trains).

    Scattering (scale ``J``, L = 8), GroupNorm(``groups``, channels) without affine parameters, Linear(features→K).

    Raises:
        ValueError: ``groups`` does not divide the channels, or H or W is not a multiple of 2^J.
    """
    front = Scattering(input_shape, J=J)
    channels = front.out_shape[0]
    if channels % groups:
        raise ValueError(f"scatternet-linear groups {groups} must divide the {channels} scattering channels")
    # GroupNorm without affine parameters is fixed too: part of the front, computed once with the features
    fixed = nn.Sequential(front, nn.GroupNorm(groups, channels, affine=False), nn.Flatten())
    return FrozenFront(fixed, nn.Linear(math.prod(front.out_shape), num_classes))

