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
    """Class means of the private unit-norm images, estimated from their local release.

    The image noise is zero-mean, so per released label a the sum S_a of released images has expectation
    Σ_j R[a, j] n_j μ_j, and the count N_a has Σ_j R[a, j] n_j, where R is k-ary randomized response's matrix
    (R[a, a] = keep, R[a, j] = (1 − keep)/(k − 1)); the identity when labels are public. Solving R for n_j μ_j and
    n_j gives unbiased class sums and counts (post-processing of the release: no privacy cost).

    Args:
        x: ``(N, d)`` released images (unit-norm image + N(0, σ²) per pixel).
        y: ``(N,)`` released int64 labels.
        num_classes: k.
        label_keep: randomized response's keep probability (None: labels released as they are).

    Returns:
        ``(k, d)`` class means.

    Raises:
        ValueError: fewer than 2 released records.
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
    """Make ``head`` the nearest-class-mean rule of the release.

    Its weight the estimated class means (``class_means_from_local_release``), its bias 0, so that it scores x·μ̂_k.

    Unit-norm images' class means have near-equal norms, and the estimates' norms are mostly noise (validation split:
    better without the −‖μ̂_k‖²/2 term at every ε ≤ 8).

    Args:
        head: the linear layer ``(k, d)`` to set, in place.
        x: ``(N, d)`` released images.
        y: ``(N,)`` released int64 labels.
        num_classes: k.
        label_keep: randomized response's keep probability (None: public labels).

    Raises:
        ValueError: fewer than 2 released records (``class_means_from_local_release``).
    """
    head.weight.copy_(class_means_from_local_release(x, y, num_classes=num_classes, label_keep=label_keep))
    head.bias.zero_()
