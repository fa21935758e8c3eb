"""Model inversion: MI-Face class reconstruction (Fredrikson, Jha, Ristenpart, CCS 2015, Algorithm 1),
and the scores shared by every reconstruction attack (SSIM / MSE to class means, nearest member vs
nearest non-member, recognition by an independent evaluation classifier)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from skimage.metrics import structural_similarity
from torch import nn

from attacks.base import InversionResult
from attacks.metrics import clopper_pearson
from bench.core.data import ArrayDataset, MembershipSplit
from bench.core.models import build_model
from bench.core.training import predict_logits
from bench.core.types import TrainedModel, TrainSpec

INITS = ("zeros", "grey", "noise", "mean")
OBJECTIVES = ("nll", "prob")
OPTIMIZERS = ("adam", "gd")
_EVALUATORS: dict[tuple, tuple[nn.Module, float]] = {}  # (population fingerprint, seed, device) -> model


# ----------------------------------------------------------------------------------------- scores


def ssim(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """SSIM (scikit-image, data range 1) of each pair of ``(N, H, W)`` images in [0, 1] -> ``(N,)``."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    win = min(7, *a.shape[-2:])
    win -= 1 - win % 2  # odd window, at most 7 (8×8 digits use 7)
    return np.array([structural_similarity(x, y, data_range=1.0, win_size=win) for x, y in zip(a, b, strict=True)])


def gray(x: torch.Tensor) -> np.ndarray:
    """``(N, C, H, W)`` tensor -> ``(N, H, W)`` float64 array (channel mean), clipped to [0, 1]."""
    return x.detach().float().cpu().mean(1).clamp(0, 1).double().numpy()


def class_means(data: ArrayDataset) -> torch.Tensor:
    """``(K, C, H, W)`` mean image of every class of ``data`` (zeros for an absent class)."""
    out = torch.zeros(data.num_classes, *data.input_shape)
    for k in range(data.num_classes):
        rows = data.x[data.y == k]
        if len(rows):
            out[k] = rows.mean(0)
    return out


def nearest_scores(images: torch.Tensor, labels: torch.Tensor, split: MembershipSplit, *,
                   max_per_side: int | None, seed: int, same_class: bool = True) -> dict[str, Any]:
    """Memorisation signal: is each reconstruction closer to a training member than to a non-member?

    Members and non-members are subsampled to the same size (per class when ``same_class``), since the
    nearest of more images is nearer; distances are mean squared errors over pixels.

    Args:
        images: ``(R, C, H, W)`` reconstructions in [0, 1]. labels: ``(R,)`` their classes.

    Returns:
        ``nearest_member_mse``, ``nearest_non_member_mse`` (means over reconstructions),
        ``nearest_member_ssim`` (SSIM to the nearest member), ``closer_to_member`` (fraction nearer to
        a member; ties count ½; 0.5 = no memorisation signal — but reconstructions that are all alike
        make it one coin flip), ``member_mse_ratio`` (nearest-member / nearest-non-member mean MSE: 1 = no
        signal, 0 = copies of members) and ``pool_per_side``.
    """
    gen = torch.Generator().manual_seed(seed + 7919)
    n = min(len(split.members), len(split.non_members), max_per_side or math.inf)
    mem = split.members.subset(torch.randperm(len(split.members), generator=gen)[:n])
    non = split.non_members.subset(torch.randperm(len(split.non_members), generator=gen)[:n])
    flat = images.detach().float().cpu().flatten(1)
    d_mem, d_non = torch.full((len(flat),), math.inf), torch.full((len(flat),), math.inf)
    nearest = torch.zeros_like(images, device="cpu")
    groups = labels.unique().tolist() if same_class else [None]
    for k in groups:
        rows = torch.arange(len(flat)) if k is None else (labels.cpu() == k).nonzero().flatten()
        pools = [d if k is None else d.subset((d.y == k).nonzero().flatten()) for d in (mem, non)]
        m = min(len(p) for p in pools)
        if m == 0:
            continue
        pools = [p.subset(torch.arange(m)) for p in pools]
        dm = torch.cdist(flat[rows].double(), pools[0].x.flatten(1).double()).pow(2) / flat.shape[1]
        dn = torch.cdist(flat[rows].double(), pools[1].x.flatten(1).double()).pow(2) / flat.shape[1]
        best_mem = dm.min(1)
        d_mem[rows], d_non[rows] = best_mem.values.float(), dn.min(1).values.float()
        nearest[rows] = pools[0].x[best_mem.indices]
    ok = torch.isfinite(d_mem) & torch.isfinite(d_non)
    if not ok.any():
        return {"nearest_member_mse": None, "nearest_non_member_mse": None, "nearest_member_ssim": None,
                "closer_to_member": None, "member_mse_ratio": None, "pool_per_side": 0}
    closer = (d_mem[ok] < d_non[ok]).double() + 0.5 * (d_mem[ok] == d_non[ok]).double()
    return {
        "nearest_member_mse": float(d_mem[ok].mean()),
        "nearest_non_member_mse": float(d_non[ok].mean()),
        "nearest_member_ssim": float(ssim(gray(images[ok]), gray(nearest[ok])).mean()),
        "closer_to_member": float(closer.mean()),
        "member_mse_ratio": float(d_mem[ok].mean() / d_non[ok].mean().clamp_min(1e-12)),
        "pool_per_side": int(n),
    }


def class_mean_scores(images: torch.Tensor, labels: torch.Tensor, members: ArrayDataset) -> dict[str, float]:
    """``ssim_class_mean`` and ``mse_class_mean``: mean SSIM / MSE of each reconstruction to the mean
    training-member image of its class (Fredrikson et al. 2015 score a class, not a person)."""
    means = class_means(members)[labels.cpu()]
    mse = (images.detach().float().cpu() - means).pow(2).flatten(1).mean(1)
    return {"ssim_class_mean": float(ssim(gray(images), gray(means)).mean()), "mse_class_mean": float(mse.mean())}


def evaluation_classifier(population: ArrayDataset, test: ArrayDataset, *, seed: int, device: torch.device
                          ) -> tuple[nn.Module, float]:
    """The attacker's independent judge: a non-private classifier trained on ``population`` (disjoint from
    the target's members), ``cnn-small`` for images of side >= 16, else ``mlp``. Trained once per
    (population, seed, device) in this process and reused by every target; deterministic given the seed;
    the global RNG state is left untouched.

    Returns:
        (model in eval mode, its accuracy on ``test``).
    """
    from mechanisms.baseline import fit_supervised

    key = (population.fingerprint(), population.input_shape, seed, device.type)
    if key not in _EVALUATORS:
        big = min(population.input_shape[1:]) >= 16
        spec = TrainSpec(model="cnn-small" if big else "mlp", epochs=4 if big else 40, batch_size=64, lr=0.05,
                         optimizer="sgd", momentum=0.9)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = build_model(spec.model, population.input_shape, population.num_classes)
            fit_supervised(model, population.x, population.y, spec, generator=torch.Generator().manual_seed(seed),
                           device=device)
        model.eval()
        acc = float((predict_logits(model, test.x, device=device).argmax(1) == test.y).float().mean())
        _EVALUATORS[key] = (model, acc)
    return _EVALUATORS[key]


# ----------------------------------------------------------------------------------------- MI-Face


def contrast_stretch(x: torch.Tensor) -> torch.Tensor:
    """Each image of ``(R, C, H, W)`` rescaled linearly to span [0, 1] (constant images are left alone)."""
    flat = x.flatten(1)
    lo, hi = flat.min(1, keepdim=True).values, flat.max(1, keepdim=True).values
    span = hi - lo
    return torch.where(span > 1e-6, (flat - lo) / span.clamp_min(1e-6), flat).view_as(x)


def total_variation(x: torch.Tensor) -> torch.Tensor:
    """Anisotropic total variation of each image, ``(R, C, H, W)`` -> ``(R,)`` (mean absolute
    difference of neighbouring pixels)."""
    dh = (x[..., 1:, :] - x[..., :-1, :]).abs().flatten(1).mean(1)
    dw = (x[..., :, 1:] - x[..., :, :-1]).abs().flatten(1).mean(1)
    return dh + dw


def initial_images(init: str, rows: int, shape: tuple[int, ...], *, mean_image: torch.Tensor | None,
                   generator: torch.Generator) -> torch.Tensor:
    """``(rows, C, H, W)`` starting points: ``zeros``, ``grey`` (0.5), ``noise`` (uniform [0, 1], seeded)
    or ``mean`` (the attacker's dataset mean image ``mean_image``)."""
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

    Row r minimises c_r(x) = L(f(x), k_r) + tv_weight·TV(x) + l2_weight·mean(x²), where L is
    −log softmax_k (``objective="nll"``; same minimiser as the paper's 1 − softmax_k without priors,
    but its gradient does not vanish where softmax_k ≈ 0) or 1 − softmax_k (``"prob"``, the paper's).
    After each step the image is projected onto the box [0, 1]. Rows are independent (the model is in
    eval mode and per-row costs are summed), so a batch of classes gives what one class at a time gives.

    Stopping rule, per row: (1) the target confidence softmax_k reaches ``threshold`` (the paper's γ),
    the current image is returned; (2) the cost has not improved by more than ``min_delta`` for
    ``patience`` iterations (the paper's window β), the best image so far is returned; (3) ``max_iter``
    iterations (the paper's α), the best image so far is returned.

    Args:
        model: the target, mapping ``(R, C, H, W)`` images in [0, 1] to logits ``(R, K)``.
        classes: ``(R,)`` int64, the class each row reconstructs. x0: ``(R, C, H, W)`` starting images.
        optimizer: ``"adam"`` (per-pixel step normalisation) or ``"gd"`` (the paper's plain step λ = lr).

    Returns:
        ``(R, C, H, W)`` reconstructions in [0, 1] (CPU) and per-row ``iterations``, ``cost``,
        ``confidence`` (target-class softmax of the returned image) and ``stop`` (reason strings).

    Raises:
        ValueError: an unknown objective or optimizer, or a setting out of range.
    """
    if objective not in OBJECTIVES or optimizer not in OPTIMIZERS:
        raise ValueError(f"objective must be in {OBJECTIVES} and optimizer in {OPTIMIZERS}")
    if max_iter < 1 or patience < 1 or lr <= 0 or not 0 < threshold <= 1:
        raise ValueError("need max_iter >= 1, patience >= 1, lr > 0 and threshold in (0, 1]")
    model.eval()
    rows = len(classes)
    k = classes.to(device)
    x = x0.to(device, torch.float32).clamp(0, 1).clone()
    best_x, best = x.clone(), torch.full((rows,), math.inf, device=device)
    wait = torch.zeros(rows, dtype=torch.long, device=device)
    active = torch.ones(rows, dtype=torch.bool, device=device)
    iters = torch.full((rows,), max_iter, dtype=torch.long, device=device)
    stop = np.array(["max-iterations"] * rows, dtype=object)
    m, v = torch.zeros_like(x), torch.zeros_like(x)
    for it in range(max_iter + 1):
        x.requires_grad_(True)
        logp = F.log_softmax(model(x).float(), dim=1).gather(1, k[:, None]).squeeze(1)
        loss = -logp if objective == "nll" else 1.0 - logp.exp()
        cost = loss + tv_weight * total_variation(x) + l2_weight * x.pow(2).flatten(1).mean(1)
        (grad,) = torch.autograd.grad(cost.sum(), x)
        x = x.detach()
        with torch.no_grad():
            cost = cost.detach()
            better = active & (cost < best - min_delta)
            best = torch.where(better, cost, best)
            best_x[better] = x[better]
            wait = torch.where(better, 0, wait + active.long())
            reached = active & (logp.detach().exp() >= threshold)
            best_x[reached], best[reached] = x[reached], cost[reached]
            stalled = active & ~reached & (wait >= patience)
            for mask, why in ((reached, "threshold"), (stalled, "no-improvement")):
                stop[mask.cpu().numpy()] = why
                iters[mask] = it
            active &= ~(reached | stalled)
            if it == max_iter or not active.any():
                break
            if optimizer == "adam":
                b1, b2 = 0.9, 0.999
                m.mul_(b1).add_(grad, alpha=1 - b1)
                v.mul_(b2).addcmul_(grad, grad, value=1 - b2)
                step = lr * (m / (1 - b1 ** (it + 1))) / ((v / (1 - b2 ** (it + 1))).sqrt() + 1e-8)
            else:
                step = lr * grad
            x = torch.where(active[:, None, None, None], (x - step).clamp(0, 1), x)
    with torch.no_grad():
        conf = F.softmax(model(best_x).float(), dim=1).gather(1, k[:, None]).squeeze(1)
    info = {"iterations": iters.cpu().numpy(), "cost": best.cpu().numpy(), "confidence": conf.cpu().numpy(),
            "stop": stop}
    return best_x.detach().cpu(), info


class MIFace:
    """MI-Face model inversion (Fredrikson, Jha, Ristenpart, CCS 2015) of every class of the target.

    Scores: ``attack_accuracy`` (95% Clopper-Pearson interval; chance 1/K) — the fraction of
    reconstructions that an independent evaluation classifier (trained on the attacker's population,
    disjoint from the members) assigns to the attacked class; SSIM / MSE to the members' class mean
    (``init_ssim_class_mean``: what the starting images already score); nearest member vs nearest
    non-member (``closer_to_member``, 0.5 = no memorisation signal). See :func:`mi_face` for the
    optimisation and the stopping rule.

    Args:
        max_per_side: members (and as many non-members) searched for nearest neighbours (None: all).
        init: ``zeros`` | ``grey`` | ``noise`` | ``mean`` (the population's mean image).
        jitter: uniform noise U[0, jitter] added to the start (seeded; clipped to [0, 1]).
        restarts: reconstructions per class (distinct only with ``init="noise"`` or ``jitter`` > 0);
            scores use all, the returned image per class is the lowest-cost restart.
        max_iter, lr, optimizer, objective, patience, min_delta, threshold, tv_weight, l2_weight:
            as in :func:`mi_face`.
        stretch: rescale each final image to span [0, 1] (the paper's post-processing step, reduced to a
            contrast stretch) before it is judged and scored; without it a scale-invariant target (the
            local-noise model normalises its input) yields images too dim to judge fairly.
    """

    name = "miface"

    def __init__(self, max_per_side: int | None = None, *, init: str = "zeros", restarts: int = 1,
                 max_iter: int = 1000, lr: float = 0.05, optimizer: str = "adam", objective: str = "nll",
                 patience: int = 100, min_delta: float = 1e-4, threshold: float = 0.99, tv_weight: float = 0.0,
                 l2_weight: float = 0.0, stretch: bool = True, jitter: float = 0.0) -> None:
        if init not in INITS:
            raise ValueError(f"init {init!r} not in {INITS}")
        if restarts < 1 or not 0 <= jitter <= 1:
            raise ValueError(f"need restarts >= 1 and jitter in [0, 1], got {restarts}, {jitter}")
        self.max_per_side, self.init, self.restarts, self.stretch = max_per_side, init, restarts, stretch
        self.jitter = jitter
        self.opts = dict(max_iter=max_iter, lr=lr, optimizer=optimizer, objective=objective, patience=patience,
                         min_delta=min_delta, threshold=threshold, tv_weight=tv_weight, l2_weight=l2_weight)

    def run(self, target: TrainedModel, split: MembershipSplit, *, seed: int, device: torch.device,
            train_like_target=None) -> InversionResult:
        members = split.members
        shape, num_classes = members.input_shape, members.num_classes
        classes = torch.arange(num_classes).repeat(self.restarts)
        mean = split.population.x.mean(0) if len(split.population) else None
        gen = torch.Generator().manual_seed(seed)
        x0 = initial_images(self.init, len(classes), shape, mean_image=mean, generator=gen)
        if self.jitter > 0:
            x0 = (x0 + self.jitter * torch.rand(x0.shape, generator=gen)).clamp(0, 1)
        images, info = mi_face(target.model, classes, x0, device=device, **self.opts)
        if self.stretch:
            images = contrast_stretch(images)
        metrics: dict[str, Any] = {"n_reconstructions": len(classes)}
        if len(split.population):
            judge, judge_acc = evaluation_classifier(split.population, split.test, seed=seed, device=device)
            pred = predict_logits(judge, images, device=device).argmax(1)
            hits = int((pred == classes).sum())
            lower, upper = clopper_pearson(hits, len(classes))
            metrics.update(attack_accuracy=hits / len(classes), attack_accuracy_lower=lower,
                           attack_accuracy_upper=upper, chance=1.0 / num_classes,
                           eval_classifier_test_accuracy=judge_acc)
        else:
            metrics["attack_accuracy"] = None
            metrics["note"] = "no attacker population: no evaluation classifier"
        metrics.update(class_mean_scores(images, classes, members))
        metrics["init_ssim_class_mean"] = class_mean_scores(x0, classes, members)["ssim_class_mean"]
        metrics.update(nearest_scores(images, classes, split, max_per_side=self.max_per_side, seed=seed))
        metrics.update({
            "target_confidence": float(info["confidence"].mean()),
            "mean_iterations": float(info["iterations"].mean()),
            "stops": {why: int((info["stop"] == why).sum()) for why in ("threshold", "no-improvement",
                                                                          "max-iterations")},
            "settings": {"init": self.init, "jitter": self.jitter, "restarts": self.restarts, "stretch": self.stretch,
                         **self.opts},
        })  # fmt: skip
        pick = torch.from_numpy(info["cost"]).view(self.restarts, num_classes).argmin(0)
        best = images.view(self.restarts, num_classes, *shape)[pick, torch.arange(num_classes)]
        return InversionResult(self.name, gray(best), np.arange(num_classes), metrics)
