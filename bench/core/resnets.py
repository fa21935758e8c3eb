"""The residual reference architectures.

With GroupNorm in place of BatchNorm (DP-SGD's per-sample gradients need layers that treat each sample alone):
torchvision's ResNet-18 and the wide ResNets (Zagoruyko & Komodakis 2016) of De et al. 2022. Registered by name in
``bench.core.catalog``; each factory takes ``(input_shape, num_classes)`` with ``input_shape = (C, H, W)`` and returns
an untrained module mapping ``(N, C, H, W)`` images to ``(N, K)`` logits.
"""

from __future__ import annotations

import torch
from torch import nn


def resnet18_gn(input_shape: tuple[int, ...], num_classes: int, stem: str = "small") -> nn.Module:
    """Torchvision ResNet-18 with GroupNorm(min(32, C), C) in place of BatchNorm and K outputs.

    ``stem="small"``: a C-channel 3×3 stride-1 first conv and no max-pool (for 28×28 input); ``stem="imagenet"``:
    torchvision's 7×7 stride-2 conv (made C-channel) and max-pool, as the ``dpsgd-resnet18`` source did.

    Raises:
        ValueError: another ``stem``.
    """
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


class WideBlock(nn.Module):
    """Pre-activation wide residual block (Zagoruyko & Komodakis 2016) with GroupNorm.

    GN-ReLU-Conv3×3(stride)- GN-ReLU-Conv3×3, plus the input (or a 1×1 strided conv of the activated input when the
    shape changes).

    Args:
        c_in: the input channels.
        c_out: the output channels.
        stride: the first convolution's stride (2 halves H and W).
        groups: the GroupNorm groups (at most the channels).
    """

    def __init__(self, c_in: int, c_out: int, stride: int, groups: int) -> None:
        super().__init__()
        self.norm1 = nn.GroupNorm(min(groups, c_in), c_in)
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False)
        self.norm2 = nn.GroupNorm(min(groups, c_out), c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, stride=1, padding=1, bias=False)
        self.shortcut = (nn.Conv2d(c_in, c_out, 1, stride=stride, bias=False)
                         if stride != 1 or c_in != c_out else None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``(N, c_in, H, W)`` -> ``(N, c_out, H / stride, W / stride)`` activations."""
        a = torch.relu(self.norm1(x))
        out = self.conv2(torch.relu(self.norm2(self.conv1(a))))
        return out + (self.shortcut(a) if self.shortcut is not None else x)


def wide_resnet(input_shape: tuple[int, ...], num_classes: int, depth: int = 16, width: int = 4,
                groups: int = 16) -> nn.Module:
    """WRN-``depth``-``width`` (Zagoruyko & Komodakis 2016) with GroupNorm(``groups``) in place of BatchNorm.

    De et al. 2022's DP-SGD CIFAR-10 model without weight standardisation: Conv3×3(16), three stages of (depth − 4)/6
    wide blocks of 16·width, 32·width, 64·width channels (strides 1, 2, 2), GN-ReLU, global average pooling (any input
    of at least 4×4), Linear(→K).

    Raises:
        ValueError: depth not 6n + 4.
    """
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
    """WRN-16-4 with GroupNorm(``groups``) (De et al. 2022, CIFAR-10; 2.75 M parameters); see ``wide_resnet``."""
    return wide_resnet(input_shape, num_classes, depth=16, width=4, groups=groups)

