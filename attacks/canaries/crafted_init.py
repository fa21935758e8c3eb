"""The auditor's choices of the crafted black-box audit (``attacks.canaries.crafted``), fixed before any coin.

The initial model θ_0, pre-trained without privacy on records disjoint from the members (Annamalai & De Cristofaro 2024:
the worst-case initial model), and the canary crafted against it.

Design notes: docs/design-notes.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from bench.core.data import ArrayDataset

CANARIES = ("pixels", "blank", "clipbkd")
ORTHOGONAL = 1e-6  # |⟨φ(x_j), Δφ⟩| ≤ this · max‖φ(x_j)‖·‖Δφ‖: the canary's read-out direction untouched by every member


@dataclass(frozen=True)
class Canary:
    """A crafted canary: its input ``x (1, ...)`` and label ``y (1,)``.

    The reference input its score subtracts (``reference (1, ...)`` or None), the unit class direction ``direction
    (K,)`` its score reads, and ``facts`` (JSON-able: kind, label, coordinates used, θ_0's probabilities on it).
    """

    x: torch.Tensor
    y: torch.Tensor
    reference: torch.Tensor | None
    direction: torch.Tensor
    facts: dict


def pretrain(model: nn.Module, data: ArrayDataset, *, epochs: int, seed: int, device: torch.device) -> nn.Module:
    """θ_0: ``model`` (built, untrained) trained without privacy on ``data``, in eval mode (``epochs`` 0: as built).

    SGD, lr 0.1, momentum 0.9, batches of 128 drawn with ``seed``; ``data`` disjoint from the members.

    Raises:
        bench.core.training.TrainingDiverged: a NaN or infinite loss (``fit_supervised``).
    """
    from bench.core.training import fit_supervised
    from bench.core.types import TrainSpec

    if epochs > 0:
        spec = TrainSpec(model="pretrain", epochs=epochs, batch_size=128, lr=0.1, optimizer="sgd", momentum=0.9)
        fit_supervised(model, data.x, data.y, spec, generator=torch.Generator().manual_seed(seed), device=device)
    return model.eval()


def _least_likely(model: nn.Module, x: torch.Tensor, device: torch.device) -> tuple[int, torch.Tensor]:
    with torch.no_grad():
        p = F.softmax(model(x.to(device)), dim=1)[0].cpu()
    return int(p.argmin()), p


def craft_canary(kind: str, model: nn.Module, base: ArrayDataset, *, device: torch.device) -> Canary:
    """The ``kind`` canary (module docstring) against θ_0 = ``model``, from the base records ``base``.

    Args:
        kind: ``pixels``, ``blank`` or ``clipbkd``.
        model: θ_0, records ``(N, C, H, W)`` to logits ``(N, K)``.
        base: the base records every run trains on.
        device: where ``model`` runs.

    Returns:
        The ``Canary``: input ``(1, C, H, W)``, label ``(1,)`` (θ_0's least likely class), reference, unit direction
        ``(K,)`` and facts.

    Raises:
        ValueError: an unknown kind; ``pixels`` when every input coordinate is used by some base record.
    """
    x = base.x.reshape(len(base), -1)
    if kind == "pixels":
        unused = x.abs().amax(0) == 0
        if not unused.any():
            raise ValueError("canary 'pixels': every input coordinate is non-zero in some member; use 'blank' or "
                             "'clipbkd'")
        canary, facts = unused.to(base.x.dtype).reshape(1, *base.input_shape), {"coordinates": int(unused.sum())}
    elif kind == "blank":
        canary, facts = torch.zeros(1, *base.input_shape), {}
    elif kind == "clipbkd":
        canary, facts = _clipbkd(x).reshape(1, *base.input_shape), {}
    else:
        raise ValueError(f"canary must be one of {CANARIES}, got {kind!r}")
    label, probs = _least_likely(model, canary, device)
    direction = F.one_hot(torch.tensor(label), base.num_classes).to(probs.dtype) - probs
    direction = direction / direction.norm()
    reference = None if kind == "blank" else torch.zeros_like(canary)
    return Canary(canary, torch.tensor([label]), reference, direction,
                  {"kind": kind, "label": label, "initial_probabilities": [float(v) for v in probs], **facts})


def _clipbkd(x: torch.Tensor) -> torch.Tensor:
    """The least-variance principal direction of the rows of ``x (N, d)``, scaled to their mean norm."""
    centred = (x - x.mean(0)).double()
    _, _, vt = torch.linalg.svd(centred, full_matrices=True)
    return (vt[-1] * x.norm(dim=1).mean().double()).float()


def isolated(model: nn.Module, canary: Canary, base: ArrayDataset, *, device: torch.device) -> bool:
    """Whether the canary's score reads weights no gradient of the ``base`` records touches.

    ``model`` (θ_0) linear in its parameters given fixed features (one ``nn.Linear`` on a parameter-free front,
    ``mechanisms.dpsgd.side_by_side.linear_head``; else False), a reference input that cancels the bias, and the
    canary's feature difference Δφ = φ(x) − φ(reference) orthogonal to every base record's features (to ``ORTHOGONAL``).
    """
    from mechanisms.dpsgd.side_by_side import linear_head

    try:
        front, _ = linear_head(model)
    except ValueError:
        return False
    if canary.reference is None:
        return False
    with torch.no_grad():
        phi = torch.cat([front(base.x[i : i + 4096].to(device)).flatten(1).cpu() for i in range(0, len(base), 4096)])
        diff = (front(canary.x.to(device)) - front(canary.reference.to(device))).flatten(1).cpu()[0]
    scale = float(phi.norm(dim=1).max() * diff.norm())
    return scale > 0 and float((phi @ diff).abs().max()) <= ORTHOGONAL * scale
