"""What release attacks know before they look at a release, shared by the membership and the reconstruction ones.

The Gaussian moments of the attacker's population (computed once per process), the linear MMSE (Wiener) estimate, a
DPMix release read as rows and its records' prior, and the attacks' shared settings.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from pydantic import Field

from bench.core.data import ArrayDataset, MembershipSplit
from bench.core.params import Params
from bench.core.types import TrainedModel

CHUNK = 1024  # candidates per block of the (T, chunk) score matrices
_MOMENTS: dict[tuple, tuple] = {}  # (population fingerprint, kind, label) -> moments, see population_moments


def gaussian_moments(z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Float64 mean ``(d,)``, unbiased covariance's eigenvalues ``(d,)`` (clipped at 0) and eigenvectors ``(d, d)``."""
    z = z.double()
    mu = z.mean(0)
    cov = (z - mu).T @ (z - mu) / max(len(z) - 1, 1)
    evals, evecs = torch.linalg.eigh(cov)
    return mu, evals.clamp_min(0.0), evecs


def with_labels(data: ArrayDataset) -> torch.Tensor:
    """``(N, C·H·W + K)`` float64: the vectors DPMix mixes, flattened image and one-hot label."""
    return torch.cat([data.x.flatten(1), F.one_hot(data.y, data.num_classes).float()], dim=1).double()


def unit_rows(x: torch.Tensor) -> torch.Tensor:
    """``(N, d)`` float64: each row of ``x`` flattened and scaled to unit L2 norm (norms floored at 1e-12)."""
    flat = x.flatten(1).double()
    return flat / flat.norm(dim=1, keepdim=True).clamp_min(1e-12)


def population_moments(data: ArrayDataset, kind: str, label: int | None = None):
    """:func:`gaussian_moments` of the attacker's population, computed once per process and reused by every target.

    ``kind`` ``"mix"``: of [image, one-hot label] vectors (what DPMix mixes); else of the unit-norm images of ``label``
    (all classes if it has fewer than 2 records), with their mean pixel L2 norm (a float) appended.
    """
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
    """Wiener ``(N, d)`` estimate of s ~ N(μ, c·Σ), Σ = V diag(λ) Vᵀ, from z = s + N(0, σ²I) (σ² = 0: z)."""
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


def dpmix_release(target: TrainedModel) -> tuple[torch.Tensor, float, int]:
    """``(z, σ_x, ℓ)``: the release as ``(T, d_x + K)`` [image, label] rows.

    A release with its own label noise σ_y < σ_x (``params["sigma_y"]``) is still scored with σ_x on every coordinate:
    weighting the labels by σ_x/σ_y measured weaker (likelihood-ratio AUC 0.57 vs 0.62 on digits, ℓ = 2, σ_x = 0.6, σ_y
    = 0.01), as one-hot labels are far from the attacks' Gaussian model.
    """
    rel = target.release
    z = torch.cat([rel.x.flatten(1), rel.y.float().flatten(1)], dim=1).double()
    return z, float(rel.params["sigma"]), int(rel.params["mixture_degree"])


def dpmix_prior(split: MembershipSplit, z: torch.Tensor, sigma: float, ell: int):
    """The record distribution's moments.

    From the population, else from the release itself (Cov(release) = Σ/ℓ + σ²I, so Σ = ℓ·(Cov − σ²I), eigenvalues
    clipped at 0).
    """
    if len(split.population) > 1:
        return population_moments(split.population, "mix")
    mu, evals, evecs = gaussian_moments(z)
    return mu, (ell * (evals - sigma**2)).clamp_min(0.0), evecs
