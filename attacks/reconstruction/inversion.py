"""Model inversion: MI-Face class reconstruction (Fredrikson, Jha, Ristenpart, CCS 2015, Algorithm 1).

Scored by ``attacks.reconstruction.scoring``.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np
import torch
import torch.nn.functional as F
from pydantic import Field
from torch import nn

from attacks.analysis.statistics.confidence import clopper_pearson
from attacks.base.attack import ReconstructionAttack
from attacks.base.context import AttackContext
from attacks.base.outputs import Reconstruction
from attacks.reconstruction.scoring import class_mean_scores, evaluation_classifier, gray, nearest_scores
from bench.core.params import Params
from bench.core.training import predict_logits

INITS = ("zeros", "grey", "noise", "mean")
OBJECTIVES = ("nll", "prob")
OPTIMIZERS = ("adam", "gd")
# ----------------------------------------------------------------------------------------- MI-Face


def contrast_stretch(x: torch.Tensor) -> torch.Tensor:
    """Each ``(R, C, H, W)`` image rescaled linearly to span [0, 1] (constant images, span <= 1e-6, left alone)."""
    flat = x.flatten(1)
    lo, hi = flat.min(1, keepdim=True).values, flat.max(1, keepdim=True).values
    span = hi - lo
    return torch.where(span > 1e-6, (flat - lo) / span.clamp_min(1e-6), flat).view_as(x)


def total_variation(x: torch.Tensor) -> torch.Tensor:
    """``(R,)`` anisotropic TV of ``(R, C, H, W)`` images: mean absolute neighbour difference along H plus along W."""
    dh = (x[..., 1:, :] - x[..., :-1, :]).abs().flatten(1).mean(1)
    dw = (x[..., :, 1:] - x[..., :, :-1]).abs().flatten(1).mean(1)
    return dh + dw


def initial_images(init: str, rows: int, shape: tuple[int, ...], *, mean_image: torch.Tensor | None,
                   generator: torch.Generator) -> torch.Tensor:
    """MI-Face's ``(rows, C, H, W)`` starting images in [0, 1] of ``shape`` ``(C, H, W)``.

    ``init``: ``zeros``, ``grey`` (0.5), ``noise`` (uniform [0, 1] from ``generator``) or ``mean`` (``mean_image``).

    Raises:
        ValueError: an unknown ``init``, or ``mean`` without a mean image.
    """
    if init == "zeros":
        return torch.zeros(rows, *shape)
    if init == "grey":
        return torch.full((rows, *shape), 0.5)
    if init == "noise":
        return torch.rand((rows, *shape), generator=generator)
    if init == "mean":
        if mean_image is None:
            raise ValueError("init 'mean' needs the attacker's mean image")
        return mean_image.expand(rows, *shape).clone()
    raise ValueError(f"init {init!r} not in {INITS}")


def mi_face(
    model: nn.Module, classes: torch.Tensor, x0: torch.Tensor, *, device: torch.device, max_iter: int = 1000,
    lr: float = 0.05, optimizer: str = "adam", objective: str = "nll", patience: int = 100,
    min_delta: float = 1e-4, threshold: float = 0.99, tv_weight: float = 0.0, l2_weight: float = 0.0,
) -> tuple[torch.Tensor, dict[str, np.ndarray]]:
    """MI-Face (Fredrikson et al. 2015, Alg. 1): projected gradient descent on the input, one row per class.

    Row r minimises c_r(x) = L(f(x), k_r) + tv_weight·TV(x) + l2_weight·mean(x²), projected onto [0, 1] after each
    step; rows are independent (eval mode, per-row costs summed), so a batch of classes gives what one at a time gives.

    Args:
        model: the target, mapping ``(R, C, H, W)`` images in [0, 1] to logits ``(R, K)``.
        classes: ``(R,)`` int64, the class each row reconstructs.
        x0: ``(R, C, H, W)`` starting images.
        device: where the model and the images live while optimising.
        max_iter: the most iterations per row (the paper's α, ≥ 1); the best image so far returned.
        lr: the step size (> 0).
        optimizer: ``"adam"`` (per-pixel step normalisation) or ``"gd"`` (the paper's plain step λ = lr).
        objective: L = −log softmax_k (``"nll"``; the paper's minimiser without priors, with a gradient that does not
            vanish where softmax_k ≈ 0) or 1 − softmax_k (``"prob"``, the paper's).
        patience: stop a row whose cost has not improved by ``min_delta`` for this many iterations (β, ≥ 1).
        min_delta: the least improvement of the cost that counts for ``patience`` (≥ 0).
        threshold: stop a row (its current image) once softmax_k reaches this (the paper's γ, in (0, 1]).
        tv_weight: the weight of the total-variation prior TV(x) (0: none).
        l2_weight: the weight of the L2 prior mean(x²) (0: none).

    Returns:
        ``(R, C, H, W)`` reconstructions in [0, 1] (CPU), per-row ``iterations``, ``cost``, ``confidence``, ``stop``.

    Raises:
        ValueError: an unknown objective or optimizer, or a setting out of range.
    """
    if objective not in OBJECTIVES or optimizer not in OPTIMIZERS:
        raise ValueError(f"objective must be in {OBJECTIVES} and optimizer in {OPTIMIZERS}")
    if max_iter < 1 or patience < 1 or lr <= 0 or not 0 < threshold <= 1:
        raise ValueError("need max_iter >= 1, patience >= 1, lr > 0 and threshold in (0, 1]")
    model.eval()
    k = classes.to(device)
    x = x0.to(device, torch.float32).clamp(0, 1).clone().requires_grad_(True)
    step = torch.optim.Adam([x], lr=lr) if optimizer == "adam" else torch.optim.SGD([x], lr=lr)
    rule = _StoppingRule(x, max_iter=max_iter, patience=patience, min_delta=min_delta, threshold=threshold)
    for it in range(max_iter + 1):
        step.zero_grad(set_to_none=True)
        logp = F.log_softmax(model(x).float(), dim=1).gather(1, k[:, None]).squeeze(1)
        loss = -logp if objective == "nll" else 1.0 - logp.exp()
        cost = loss + tv_weight * total_variation(x) + l2_weight * x.pow(2).flatten(1).mean(1)
        cost.sum().backward()
        frozen = x.detach().clone()
        if not rule.update(it, cost.detach(), logp.detach(), frozen):
            break
        step.step()  # torch's Adam (per-pixel step normalisation) or plain gradient descent
        with torch.no_grad():  # project onto [0, 1]; rows that stopped keep their image
            x.clamp_(0, 1)
            x[~rule.active] = frozen[~rule.active]
    with torch.no_grad():
        conf = F.softmax(model(rule.best_x).float(), dim=1).gather(1, k[:, None]).squeeze(1)
    info = {"iterations": rule.iters.cpu().numpy(), "cost": rule.best.cpu().numpy(),
            "confidence": conf.cpu().numpy(), "stop": rule.stop}
    return rule.best_x.cpu(), info


class _StoppingRule:
    """MI-Face's per-row stopping rule and best-so-far images (see :func:`mi_face`)."""

    def __init__(self, x: torch.Tensor, *, max_iter: int, patience: int, min_delta: float, threshold: float) -> None:
        rows, device = len(x), x.device
        self.max_iter, self.patience, self.min_delta, self.threshold = max_iter, patience, min_delta, threshold
        self.best_x, self.best = x.detach().clone(), torch.full((rows,), math.inf, device=device)
        self.wait = torch.zeros(rows, dtype=torch.long, device=device)
        self.active = torch.ones(rows, dtype=torch.bool, device=device)
        self.iters = torch.full((rows,), max_iter, dtype=torch.long, device=device)
        self.stop = np.array(["max-iterations"] * rows, dtype=object)

    @torch.no_grad()
    def update(self, it: int, cost: torch.Tensor, logp: torch.Tensor, now: torch.Tensor) -> bool:
        """Record iteration ``it``'s costs, log target probabilities and images ``(R, ...)``.

        False when every row has stopped or ``max_iter`` is reached.
        """
        active = self.active
        better = active & (cost < self.best - self.min_delta)
        self.best = torch.where(better, cost, self.best)
        self.best_x[better] = now[better]
        self.wait = torch.where(better, 0, self.wait + active.long())
        reached = active & (logp.exp() >= self.threshold)
        self.best_x[reached], self.best[reached] = now[reached], cost[reached]
        stalled = active & ~reached & (self.wait >= self.patience)
        for mask, why in ((reached, "threshold"), (stalled, "no-improvement")):
            self.stop[mask.cpu().numpy()] = why
            self.iters[mask] = it
        self.active = active & ~(reached | stalled)
        return it < self.max_iter and bool(self.active.any())


class MIFaceParams(Params):
    """MI-Face's settings (see :func:`mi_face` for the optimisation and the stopping rule).

    Attributes:
        init: start ``zeros`` | ``grey`` | ``noise`` | ``mean`` (the population's mean image).
        jitter: uniform noise U[0, jitter] added to the start (seeded; clipped to [0, 1]), in [0, 1].
        restarts: reconstructions per class (>= 1; distinct only with ``init: noise`` or ``jitter`` > 0); scores
            use all, the returned image per class is the lowest-cost restart.
        max_iter: as in :func:`mi_face`: iterations.
        lr: as in :func:`mi_face`: step size.
        optimizer: as in :func:`mi_face`: ``adam`` | ``gd``.
        objective: as in :func:`mi_face`: ``nll`` | ``prob``.
        patience: as in :func:`mi_face`: the stopping window.
        min_delta: as in :func:`mi_face`: the minimum improvement.
        threshold: as in :func:`mi_face`: the target confidence, in (0, 1].
        tv_weight: as in :func:`mi_face`: the total-variation prior's weight, >= 0.
        l2_weight: as in :func:`mi_face`: the L2 prior's weight, >= 0.
        stretch: rescale each final image to span [0, 1] (the paper's post-processing step, reduced to a
            contrast stretch) before it is judged and scored; without it a scale-invariant target (the
            local-noise model normalises its input) yields images too dim to judge fairly.
    """

    init: Literal["zeros", "grey", "noise", "mean"] = "zeros"
    restarts: int = Field(1, ge=1)
    max_iter: int = Field(1000, ge=1)
    lr: float = Field(0.05, gt=0)
    optimizer: Literal["adam", "gd"] = "adam"
    objective: Literal["nll", "prob"] = "nll"
    patience: int = Field(100, ge=1)
    min_delta: float = Field(1e-4, ge=0)
    threshold: float = Field(0.99, gt=0, le=1)
    tv_weight: float = Field(0.0, ge=0)
    l2_weight: float = Field(0.0, ge=0)
    stretch: bool = True
    jitter: float = Field(0.0, ge=0, le=1)


class MIFace(ReconstructionAttack):
    """MI-Face model inversion (Fredrikson, Jha, Ristenpart, CCS 2015) of every class of the target.

    Scores: ``attack_accuracy`` (95% Clopper-Pearson interval; chance 1/K) — the fraction of
    reconstructions that an independent evaluation classifier (trained on the attacker's population,
    disjoint from the members) assigns to the attacked class; SSIM / MSE to the members' class mean
    (``init_ssim_class_mean``: what the starting images already score); nearest member vs nearest
    non-member (``closer_to_member``, 0.5 = no memorisation signal), among as many members and non-members
    as the cell scores. Settings: ``MIFaceParams``.
    """

    name = "miface"
    Params = MIFaceParams
    needs_images = True

    def _judge(self, ctx: AttackContext, images: torch.Tensor, classes: torch.Tensor) -> dict[str, Any]:
        split = ctx.split
        if not len(split.population):
            return {"attack_accuracy": None, "note": "no attacker population: no evaluation classifier"}
        judge, judge_acc = evaluation_classifier(split.population, split.test, seed=ctx.seed, device=ctx.device)
        hits = int((predict_logits(judge, images, device=ctx.device).argmax(1) == classes).sum())
        lower, upper = clopper_pearson(hits, len(classes))
        return {"attack_accuracy": hits / len(classes), "attack_accuracy_lower": lower,
                "attack_accuracy_upper": upper, "chance": 1.0 / split.members.num_classes,
                "eval_classifier_test_accuracy": judge_acc}

    def reconstruct(self, ctx: AttackContext) -> Reconstruction:
        """MI-Face of every class (``restarts`` times), judged and scored (Fredrikson, Jha, Ristenpart 2015, Alg. 1).

        Args:
            ctx: the target, its split and the attacker's population.

        Returns:
            A ``Reconstruction``: ``(K, H, W)`` grey images in [0, 1], the lowest-cost restart per class, labels
            0..K − 1, and the metrics of the class docstring with the optimisation's (target confidence, iterations,
            stop reasons, settings).

        Raises:
            ValueError: from ``initial_images`` (``init: mean`` without an attacker population) or ``mi_face``.
        """
        p, split = self.params, ctx.split
        members = split.members
        shape, num_classes = members.input_shape, members.num_classes
        classes = torch.arange(num_classes).repeat(p.restarts)
        mean = split.population.x.mean(0) if len(split.population) else None
        gen = torch.Generator().manual_seed(ctx.seed)
        x0 = initial_images(p.init, len(classes), shape, mean_image=mean, generator=gen)
        if p.jitter > 0:
            x0 = (x0 + p.jitter * torch.rand(x0.shape, generator=gen)).clamp(0, 1)
        opts = p.model_dump(exclude={"init", "restarts", "stretch", "jitter"})
        images, info = mi_face(ctx.target.model, classes, x0, device=ctx.device, **opts)
        if p.stretch:
            images = contrast_stretch(images)
        metrics: dict[str, Any] = {"n_reconstructions": len(classes), **self._judge(ctx, images, classes)}
        metrics.update(class_mean_scores(images, classes, members))
        metrics["init_ssim_class_mean"] = class_mean_scores(x0, classes, members)["ssim_class_mean"]
        metrics.update(nearest_scores(images, classes, split, max_per_side=len(ctx.member_index), seed=ctx.seed))
        metrics.update({
            "target_confidence": float(info["confidence"].mean()),
            "mean_iterations": float(info["iterations"].mean()),
            "stops": {why: int((info["stop"] == why).sum()) for why in ("threshold", "no-improvement",
                                                                          "max-iterations")},
            "settings": p.to_json(),
        })  # fmt: skip
        pick = torch.from_numpy(info["cost"]).view(p.restarts, num_classes).argmin(0)
        best = images.view(p.restarts, num_classes, *shape)[pick, torch.arange(num_classes)]
        return Reconstruction(gray(best), np.arange(num_classes), metrics)
