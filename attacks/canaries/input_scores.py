"""The black-box scores of a one-run audit's input canaries (``attacks.canaries.canary``).

Read from the audit run's final model alone: its loss, or its logits less those of the blank image (all zeros) along
the canary's label (``output-difference``: e_y − 1/K; ``margin``: e_y − e_c, c the other class with the largest
logit). Every score is a function of the final model and the public canaries only, so the one-run analyses stay valid
whatever the model. Why the margin direction: docs/design-notes.md; measured in docs/audits.md, "Closing the gap".
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import torch
import torch.nn.functional as F

from bench.core.data import ArrayDataset
from bench.core.training import per_example_loss

Score = Literal["loss", "output-difference", "margin"]


def input_canary_scores(model: torch.nn.Module, canaries: ArrayDataset, *, score: Score,
                        device: torch.device) -> np.ndarray:
    """``(m,)`` float64 scores of the m input canaries on the audit run's final ``model``, larger meaning "included".

    ``score``: ``loss`` (minus the per-example loss), ``output-difference`` (⟨d(x), e_y − 1/K⟩) or ``margin``
    (d(x)_y − max_{c≠y} d(x)_c), with d(x) = logits(x) − logits(blank image).

    Raises:
        ValueError: an unknown ``score``.
    """
    if score == "loss":
        return -per_example_loss(model, canaries.x, canaries.y, device=device)
    if score not in ("output-difference", "margin"):
        raise ValueError(f"canary score must be loss, output-difference or margin, got {score!r}")
    k = canaries.num_classes
    with torch.no_grad():
        model.eval()
        blank = model(torch.zeros(1, *canaries.input_shape, device=device))
        out = torch.cat([model(canaries.x[i : i + 1024].to(device)) for i in range(0, len(canaries), 1024)]) - blank
    own = F.one_hot(canaries.y.to(device), k).to(out.dtype)
    if score == "output-difference":
        return (out * (own - 1.0 / k)).sum(1).cpu().numpy().astype(np.float64)
    rival = out.masked_fill(own > 0, -torch.inf).amax(1)
    return ((out * own).sum(1) - rival).cpu().numpy().astype(np.float64)
