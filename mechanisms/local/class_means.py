"""The ``class-means`` learner of local Gaussian noise (``LocalGaussianParams.learner``).

A nearest-class-mean classifier estimated in closed form from the local release alone (images and randomized-response
labels), so post-processing of the release at no privacy cost. With isotropic noise far larger than the signal, the
class means are what a learner can still estimate.
"""

from __future__ import annotations

import torch
from torch import nn


@torch.no_grad()
def class_means_from_local_release(x: torch.Tensor, y: torch.Tensor, *, num_classes: int,
                                   label_keep: float | None) -> torch.Tensor:
    """``(k, d)`` unbiased class means of the private unit-norm images from their release ``x (N, d)``, ``y (N,)``.

    Per released label a, E[S_a] = Σ_j R[a, j] n_j μ_j and E[N_a] = Σ_j R[a, j] n_j, R randomized response's matrix
    (keep ``label_keep`` on the diagonal; the identity for None, public labels); solving R gives the class sums and
    counts (post-processing). ValueError for fewer than 2 records.
    """
    if len(x) < 2:
        raise ValueError(f"class means need at least 2 released records, got {len(x)}")
    k = num_classes
    onehot = torch.nn.functional.one_hot(y, k).double()  # (N, k)
    sums, counts = onehot.T @ x.double(), onehot.sum(0)  # (k, d), (k,)
    if label_keep is None:
        inv = torch.eye(k, dtype=torch.float64)
    else:
        r = torch.full((k, k), (1.0 - label_keep) / (k - 1), dtype=torch.float64)
        r.fill_diagonal_(label_keep)
        inv = torch.linalg.inv(r)
    return ((inv @ sums) / (inv @ counts).clamp_min(1.0)[:, None]).float()


@torch.no_grad()
def fit_class_means(head: nn.Linear, x: torch.Tensor, y: torch.Tensor, *, num_classes: int,
                    label_keep: float | None) -> None:
    """Make ``head`` ``(k, d)`` the nearest-class-mean rule x·μ̂_k (bias 0) of the release, in place."""
    head.weight.copy_(class_means_from_local_release(x, y, num_classes=num_classes, label_keep=label_keep))
    head.bias.zero_()
