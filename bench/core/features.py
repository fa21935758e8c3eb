"""What a CNN's convolutions see.

The feature maps of its first convolutions on one image, read by forward hooks on the model's own layers (never a copy
of them), and its first layer's learnt filters (the visualisation of Zeiler & Fergus, ECCV 2014, §2, at its simplest:
activations and first-layer weights).
"""

from __future__ import annotations

from typing import TypedDict

import torch
from torch import nn


class ConvFeatures(TypedDict):
    """What ``conv_feature_maps`` reads.

    Attributes:
        layers: the convolutions' names (``named_modules``).
        maps: one ``(channels, h, w)`` float32 CPU tensor per layer.
        filters: the first convolution's ``(out, in, kh, kw)`` float32 CPU weights.
    """

    layers: list[str]
    maps: list[torch.Tensor]
    filters: torch.Tensor


def conv_layers(model: nn.Module) -> list[tuple[str, nn.Conv2d]]:
    """Every ``nn.Conv2d`` of ``model`` as ``(name, module)`` in registration (here: forward) order."""
    return [(name, m) for name, m in model.named_modules() if isinstance(m, nn.Conv2d)]


@torch.no_grad()
def conv_feature_maps(model: nn.Module, image: torch.Tensor, *, layers: int = 2, max_channels: int = 32,
                      device: torch.device | str = "cpu") -> ConvFeatures | None:
    """The outputs of the first ``layers`` convolutions of ``model`` on one image, and the first one's filters.

    A forward hook on each convolution module of ``model`` itself records its output during one forward pass of
    the whole model (eval mode; the mode of every submodule is restored), so the maps are what the trained model
    computes, preprocessing (e.g. local noise's normalisation) included.

    Args:
        model: a module mapping ``(N, C, H, W)`` images to logits.
        image: ``(C, H, W)`` in [0, 1].
        layers: how many convolutions (the first ones).
        max_channels: at most this many channels kept per layer.
        device: where to run the forward pass.

    Returns:
        A ``ConvFeatures`` dict, or None when ``model`` has no convolution. Its keys are ``layers`` (the layers'
        names), ``maps`` (a list of (channels, h, w) float32 tensors on CPU) and ``filters`` (an
        (out, in, kh, kw) float32 tensor).
    """
    convs = conv_layers(model)[:layers]
    if not convs:
        return None
    captured: dict[str, torch.Tensor] = {}

    def hook(name: str):
        def record(module: nn.Module, inputs: tuple, output: torch.Tensor) -> None:
            captured.setdefault(name, output.detach()[0, :max_channels].float().cpu().clone())
        return record

    handles = [m.register_forward_hook(hook(name)) for name, m in convs]
    modes = {m: m.training for m in model.modules()}
    try:
        model.eval()
        model(image.unsqueeze(0).to(device))
    finally:
        for h in handles:
            h.remove()
        for m, mode in modes.items():
            m.training = mode
    names = [name for name, _ in convs if name in captured]
    return ConvFeatures(layers=names, maps=[captured[n] for n in names],
                        filters=convs[0][1].weight.detach()[:max_channels].float().cpu().clone())
