"""The pieces of the ``opacus-canary`` observer (``attacks.canaries.opacus.observer``) that do not patch Opacus.

The canary records, the reference coordinates, the scores, and the **phases** of a user's loop — each ``DPOptimizer``
the loop steps on the model (a second training phase, a second ``PrivacyEngine``), read from its own accountant's step
hook: its sample rate q, its noise multiplier σ, its clip bound C, its accountant. Every phase's noisy steps are
observed; the ε from measured parameters composes them all (``attacks.conformance.opacus``), so a loop that reports the
ε of one phase while it trained two is held to both.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from attacks.membership.shadows import shadow_seed

REFERENCES_PER_TENSOR = 500  # at most, per parameter tensor (and at most a quarter of it): coordinates without a
# canary, where the updates carry the noise alone
NOT_CERTIFIED = ("gdp",)  # Opacus accountants whose ε is an approximation, not a certificate


class AuditRefused(ValueError):
    """The user's loop is not one this audit can observe (one line: what it assumes, and what it saw)."""


@dataclass
class Phase:
    """One ``DPOptimizer`` the loop steps.

    Its accountant (read from its step hook), that accountant's q, the optimizer's σ and C, the order of its parameters
    in the observer's layout (the first optimizer's order), and what was observed of it: steps, the rows of its batches,
    the largest clipped canary contribution (units of C).
    """

    opt: Any
    accountant: Any
    q: float
    sigma: float
    clip: float
    order: list[int] = field(default_factory=list)
    steps: int = 0
    batch_rows: int = 0
    largest_clip: float | None = None

    def params(self) -> list[Any]:
        """The optimizer's parameter tensors, in the first optimizer's (the observer's layout) order."""
        params = list(self.opt.params)
        return [params[i] for i in self.order] if self.order else params

    def summary(self) -> dict[str, Any]:
        """What the conformance tests read of this phase besides its noise and its canaries' hits (JSON-able)."""
        history = [[float(s), float(q), int(t)] for s, q, t in getattr(self.accountant, "history", [])]
        return {"claimed_sigma": self.sigma, "sample_rate": self.q, "steps": self.steps, "clip_bound": self.clip,
                "batch_rows": self.batch_rows, "largest_clip": self.largest_clip, "history": history,
                "accountant": getattr(self.accountant, "mechanism", lambda: "unknown")(),
                "accountant_id": id(self.accountant)}


def base_clip() -> Any:
    """Opacus' flat per-sample clipping, ``DPOptimizer.clip_and_accumulate`` (Opacus imported here)."""
    from opacus.optimizers import DPOptimizer

    return DPOptimizer.clip_and_accumulate


def read_phase(opt: Any) -> Phase:
    """The ``Phase`` of a ``DPOptimizer`` from its accountant's step hook.

    Args:
        opt: an Opacus ``DPOptimizer``.

    Returns:
        Its ``Phase``: the accountant's q, the optimizer's σ and C, nothing observed yet.

    Raises:
        AuditRefused: Opacus' gdp accountant, no step hook (not made by ``PrivacyEngine.make_private*``), or clipping
            that is not flat.
    """
    hook = opt.step_hook
    closure = getattr(hook, "__closure__", None)
    cells = dict(zip(hook.__code__.co_freevars, [c.cell_contents for c in closure], strict=True)) if closure else {}
    accountant = cells.get("self")
    kind = getattr(accountant, "mechanism", lambda: "")()
    if kind in NOT_CERTIFIED:
        raise AuditRefused(f"opacus-canary: the loop's accountant is Opacus' {kind}, a central-limit approximation "
                           "that is not an upper bound on ε; the audit holds a loop to a certified ε (accountant prv "
                           "or rdp)")
    if "sample_rate" not in cells:
        raise AuditRefused("opacus-canary: the DPOptimizer has no accountant step hook (it was not made by "
                           "PrivacyEngine.make_private*); the audit reads the accountant's sample rate there")
    if type(opt).clip_and_accumulate is not base_clip():
        raise AuditRefused(f"opacus-canary: {type(opt).__name__} clips per layer or per device; the audit supports the "
                           "flat clipping of DPOptimizer")
    return Phase(opt, accountant, float(cells["sample_rate"]), float(opt.noise_multiplier), float(opt.max_grad_norm))


def same_parameters(first: list[Any], opt: Any) -> list[int]:
    """The index in ``opt.params`` of each of the ``first`` optimizer's parameters, in that order.

    Raises:
        AuditRefused: the two optimizers do not step the same parameter tensors.
    """
    where = {id(p): i for i, p in enumerate(opt.params)}
    order = [where.get(id(p), -1) for p in first]
    if -1 in order or len(where) != len(first):
        raise AuditRefused("opacus-canary: the loop steps a second DPOptimizer over other parameters than the first's; "
                           "the audit observes optimizers that all train the same model parameters")
    return order


def canary_records(m: int, input_shape: tuple[int, ...], num_classes: int, seed: int
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    """``m`` canaries drawn with ``seed``: float32 images ``(m, *input_shape)`` uniform in [0, 1], labels ``(m,)``."""
    gen = torch.Generator().manual_seed(shadow_seed(seed, "canary", 10 + 0))
    return torch.rand((m, *input_shape), generator=gen), torch.randint(0, num_classes, (m,), generator=gen)


def references(sizes: list[int]) -> list[int]:
    """Reference coordinates per parameter tensor: min(``REFERENCES_PER_TENSOR``, ⌈size/4⌉) for each of ``sizes``."""
    return [min(REFERENCES_PER_TENSOR, -(-n // 4)) for n in sizes]


def row_keys(x: torch.Tensor) -> list[bytes]:
    """Each row of a ``(B, ...)`` batch as float32 bytes: a batch's canary records are recognised by their images."""
    return [row.tobytes() for row in x.detach().cpu().float().reshape(len(x), -1).numpy()]


def log_likelihood_ratio(x: np.ndarray, *, q: float, sigma: float) -> np.ndarray:
    """``(m,)`` scores Σ_t log(1 − q + q·exp((2x_t − 1)/(2σ²))) of observations ``x`` ``(T, m)`` in units of C.

    The Neyman-Pearson test of Nasr et al. 2023's Dirac canaries (sampled at rate q vs absent; Σ_t x_t at σ = 0).
    """
    if sigma <= 1e-12:
        return x.sum(0)
    z = (2 * x - 1) / (2 * sigma**2)
    return (np.logaddexp(np.log1p(-q), np.log(q) + z) if q < 1 else z).sum(0)


def observed_phases(result: dict) -> list[list[float]]:
    """One ``[σ, q, T]`` per DPOptimizer the loop stepped, in order (for the runner's last-iterate heuristic ε)."""
    return [[float(p["claimed_sigma"]), float(p["sample_rate"]), int(p["steps"])] for p in result["phases"]]
