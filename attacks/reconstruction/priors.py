"""What release attacks know before they look at a release: the Gaussian moments of the attacker's population
(computed once per process), the linear MMSE (Wiener) estimate, and the attacks' shared settings."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from pydantic import Field

from bench.core.data import ArrayDataset
from bench.core.params import Params

CHUNK = 1024  # candidates per block of the (T, chunk) score matrices
_MOMENTS: dict[tuple, tuple] = {}  # (population fingerprint, kind, label) -> moments, see population_moments


def gaussian_moments(z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Mean ``(d,)``, covariance eigenvalues ``(d,)`` (clipped at 0) and eigenvectors ``(d, d)`` of the
    rows of ``z`` ``(N, d)``, in float64."""
    z = z.double()
    mu = z.mean(0)
    cov = (z - mu).T @ (z - mu) / max(len(z) - 1, 1)
    evals, evecs = torch.linalg.eigh(cov)
    return mu, evals.clamp_min(0.0), evecs


def with_labels(data: ArrayDataset) -> torch.Tensor:
    """``(N, d_x + K)``: flattened image and one-hot label, the vector DPMix mixes."""
    return torch.cat([data.x.flatten(1), F.one_hot(data.y, data.num_classes).float()], dim=1).double()


def unit_rows(x: torch.Tensor) -> torch.Tensor:
    flat = x.flatten(1).double()
    return flat / flat.norm(dim=1, keepdim=True).clamp_min(1e-12)


def population_moments(data: ArrayDataset, kind: str, label: int | None = None):
    """:func:`gaussian_moments` of the attacker's population, computed once per process and reused by
    every target: ``kind="mix"`` — [image, one-hot label] vectors (what DPMix mixes); ``"unit"`` — unit-
    norm images of class ``label`` (all classes if it has fewer than 2), with their mean pixel L2 norm."""
    key = (data.fingerprint(), kind, label)
    if key not in _MOMENTS:
        if kind == "mix":
            _MOMENTS[key] = gaussian_moments(with_labels(data))
        else:
            ref = data.x[data.y == label] if (data.y == label).sum() > 1 else data.x
            norm = float(ref.flatten(1).double().norm(dim=1).mean())
            _MOMENTS[key] = (*gaussian_moments(unit_rows(ref)), norm)
    return _MOMENTS[key]


def wiener(z: torch.Tensor, mu: torch.Tensor, lam: torch.Tensor, vecs: torch.Tensor, signal_scale: float,
           noise_var: float) -> torch.Tensor:
    """Linear MMSE estimate of a signal s ~ N(mu, signal_scale·Σ) from z = s + N(0, noise_var·I) — or,
    for a mixture, of one record from the mixture: μ + V diag(cλ / (cλ + σ²)) Vᵀ (z − μ), Σ = V diag(λ) Vᵀ."""
    gain = torch.ones_like(lam) if noise_var == 0 else signal_scale * lam / (signal_scale * lam + noise_var)
    return mu + ((z - mu) @ vecs) * gain @ vecs.T


class CandidateParams(Params):
    """Settings of a release-membership attack.

    Attributes:
        max_candidates: at most this many members (and as many non-members) scored, below the run's
            ``max_attack_examples`` (None: no cap of its own).
    """

    max_candidates: int | None = Field(None, ge=1)


class ImagesParams(Params):
    """Settings of a release-reconstruction attack.

    Attributes:
        max_images: released samples (or records) reconstructed and scored (>= 1).
    """

    max_images: int = Field(1000, ge=1)


