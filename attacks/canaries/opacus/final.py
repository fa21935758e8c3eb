"""Final-model (hidden-state) audit of any plug-in whose training goes through Opacus' ``DPOptimizer``.

The user's code unchanged (Cebere et al. 2024, "Tighter privacy auditing of DP-SGD in the hidden state threat model";
Steinke, Nasr, Jagielski 2023, §6: gradient canaries scored from the final model only; Nasr et al. 2023, §3:
crafted-gradient and Dirac canaries).

Design notes: docs/design-notes.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

import numpy as np
import torch
from pydantic import Field

from attacks.base.context import AttackContext
from attacks.base.outputs import MembershipScores
from attacks.canaries.opacus.audit import OpacusCanaryAudit
from attacks.canaries.opacus.observer import AuditRefused, OpacusCanaries, OpacusObserver, canary_records
from attacks.canaries.opacus.phases import observed_phases
from attacks.membership.shadows import shadow_seed
from bench.core.data import ArrayDataset
from bench.core.design import AuditDesign
from bench.core.params import Params
from bench.core.plain import plain_module

__all__ = ["FinalCanaries", "FinalModelObserver", "OpacusFinalCanaryAudit", "OpacusFinalCanaryParams",
           "initial_weights"]
LINEARITY_TOLERANCE = 1e-3  # largest |θ_T − θ_0 − the updates' sum| allowed, in units of C·c̄ (a score's unit)
NAME = "opacus-canary-final"


def initial_weights(mechanism, data: ArrayDataset, spec, seed: int) -> list[torch.Tensor]:
    """θ_0: clones of the trainable parameters of ``mechanism.build`` for ``data`` after ``torch.manual_seed(seed)``.

    In ``build``'s order; the global generator's state is restored after.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = mechanism.build(data.input_shape, data.num_classes, spec)
    return [p.detach().clone() for p in model.parameters() if p.requires_grad]


@dataclass(frozen=True)
class FinalCanaries(OpacusCanaries):
    """The final-model audit run's request.

    As ``OpacusCanaries`` (``dirac`` -1: one Dirac canary at every coordinate not taken by a record or a reference),
    scored from θ_T − θ_0.
    """

    def observe(self, data: ArrayDataset, *, mechanism=None, spec=None, seed: int | None = None,
                **run) -> FinalModelObserver:
        """The run's ``FinalModelObserver``, θ_0 from the job's ``mechanism``, ``spec``, ``seed`` (or AuditRefused)."""
        if mechanism is None or spec is None or seed is None:
            raise AuditRefused(f"{NAME}: the audit run gave no mechanism, spec and seed to build θ_0 from")
        images = canary_records(self.records, data.input_shape, data.num_classes, self.seed)[0]
        return FinalModelObserver(self, images, initial_weights(mechanism, data, spec, seed), records_total=len(data))


def _differences(got: list[torch.Tensor], want: list[torch.Tensor]) -> str | None:
    """Why two lists of tensors are not the same weights (one phrase), or None when they are, exactly."""
    shapes, wanted = [tuple(t.shape) for t in got], [tuple(t.shape) for t in want]
    if shapes != wanted:
        return f"parameter shapes {shapes} where build gives {wanted}"
    gap = max(float((a.detach().cpu().double() - b.cpu().double()).abs().max()) for a, b in zip(got, want, strict=True))
    return None if gap == 0 else f"weights up to {gap:.3g} away from build's"


class FinalModelObserver(OpacusObserver):
    """``OpacusObserver`` in the hidden-state threat model.

    The canaries are planted the same way, the scores come from θ_T − θ_0 (module docstring). Raises ``AuditRefused``
    (one line) where an assumption fails.

    Args:
        request: the canaries.
        images: the canary records' images ``(m, *input_shape)``.
        theta0: θ_0, the trainable parameters in ``build``'s order (``initial_weights``).
        records_total: n, the training records given to ``fit``.
    """

    def __init__(self, request: FinalCanaries, images: torch.Tensor, theta0: list[torch.Tensor], *,
                 records_total: int = 0) -> None:
        super().__init__(request, images, records_total=records_total)
        self.theta0 = theta0
        self.rates: list[tuple[float, float]] = []  # per step: (lr_t, B_t)
        self.member_steps: list[np.ndarray] = []  # per step: the members' clipped sum / C at the observed coordinates

    several = False  # θ_T − θ_0 is read as one optimizer's updates: a second DPOptimizer is refused

    def _setup(self, opt) -> None:
        super()._setup(opt)
        inner = opt.original_optimizer
        if type(inner) is not torch.optim.SGD:
            raise AuditRefused(f"{NAME}: the loop's optimizer is {type(inner).__name__}; the final-model audit needs "
                               "torch.optim.SGD (θ_T − θ_0 linear in the noisy updates)")
        groups = inner.param_groups
        bad = [f"{k}={g[k]}" for g in groups for k, ok in
               (("weight_decay", 0), ("dampening", 0), ("nesterov", False), ("maximize", False)) if g.get(k, ok) != ok]
        if bad or len({g["momentum"] for g in groups}) != 1:
            raise AuditRefused(f"{NAME}: the final-model audit needs SGD with one momentum and no weight decay, "
                               f"dampening, Nesterov or maximize, got {', '.join(bad) or 'several momenta'}")
        self.momentum = float(groups[0]["momentum"])
        why = _differences(list(opt.params), self.theta0)
        if why is not None:
            raise AuditRefused(f"{NAME}: at the DPOptimizer's first step the model has {why} after "
                               "torch.manual_seed(seed); the audit needs fit to start from that public θ_0")
        self.start = self._read(self.theta0)

    @staticmethod
    def _renamed(exc: AuditRefused) -> AuditRefused:
        """A refusal of the shared observer, under this audit's name."""
        return AuditRefused(str(exc).replace("opacus-canary:", f"{NAME}:", 1))

    def _step(self, opt) -> bool:
        if opt.grad_samples is None or len(opt.grad_samples) == 0:
            return True
        try:
            done = super()._step(opt)
        except AuditRefused as exc:
            raise self._renamed(exc) from None
        lrs = {g["lr"] for g in opt.original_optimizer.param_groups}
        if len(lrs) != 1:
            raise AuditRefused(f"{NAME}: the loop's SGD has {len(lrs)} learning rates; the audit needs one")
        self.rates.append((float(lrs.pop()), float(opt.expected_batch_size if opt.loss_reduction == "mean" else 1)))
        self.member_steps.append((self.members / self.C).astype(np.float32))
        return done

    def step_weights(self) -> tuple[np.ndarray, float]:
        """Step t's noisy sum moves θ by −c_t·s_t, c_t = (1/B_t)·Σ_{u≥t} lr_u·μ^{u−t} (heavy-ball momentum μ).

        Returns:
            ``(c_t / c̄ (T,), c̄)``.
        """
        c, acc = np.empty(len(self.rates)), 0.0
        for t in reversed(range(len(self.rates))):
            lr, batch = self.rates[t]
            acc = lr + self.momentum * acc
            c[t] = acc / batch
        return c / c.mean(), float(c.mean())

    def result(self, model=None) -> dict:
        """The audit's JSON-able record.

        JSON-able: ``{"records": {"scores", "included"}, "dirac": {...}, "hits", "steps", "sample_rate",
        "sigma_hat", "claimed_sigma", "lr" (the first step's), "momentum", "expected_batch_size", "members_sd",
        "noise_sd", "linearity_error", "phases" (``observed_phases``)}``; scores in units of C, larger means
        included. ``model``: what ``fit`` returned (θ_T; the optimizer's parameters when None).

        Args:
            model: what ``fit`` returned, or None.

        Returns:
            That dict.

        Raises:
            AuditRefused: (one line) where an assumption fails: no step observed, no canary record in a batch, a
                returned model of another architecture, or θ_T − θ_0 not the sum of the observed SGD updates.
        """
        try:  # the observer's own checks (a step was observed, the records reached the model)
            base = super().result()
        except AuditRefused as exc:
            raise self._renamed(exc) from None
        released = [p.detach() for p in plain_module(model).parameters() if p.requires_grad] if model is not None \
            else [p.detach() for p in self.opt.params]
        why = _differences(released, self.theta0)
        if why is not None and why.startswith("parameter shapes"):
            raise AuditRefused(f"{NAME}: the model fit returned has {why}; the audit needs build's architecture")
        w, c_bar = self.step_weights()
        scores = -(self._read(released) - self.start) / (self.C * c_bar)
        observed = np.stack(self.x).astype(np.float64) + np.stack(self.member_steps)  # noisy sums / C
        gap = float(np.max(np.abs(w @ observed - scores)))
        if gap > LINEARITY_TOLERANCE * max(1.0, float(np.std(scores))):
            raise AuditRefused(f"{NAME}: θ_T − θ_0 differs from the sum of the observed SGD updates by up to {gap:.3g}"
                               " (units of C); something else moved the weights (weight decay, an average, a second "
                               "optimizer), and the audit needs the final model linear in the noisy updates")
        r, d = self.request.records, self.d
        drift = w @ np.stack(self.member_steps)[:, : r + d].astype(np.float64)
        return {
            "records": {"scores": scores[:r].tolist(), "included": base["records"]["included"]},
            "dirac": {"scores": scores[r:r + d].tolist(), "included": base["dirac"]["included"]},
            "hits": base["hits"], "steps": base["steps"], "sample_rate": base["sample_rate"],
            "sigma_hat": base["sigma_hat"], "claimed_sigma": base["claimed_sigma"], "lr": self.rates[0][0],
            "momentum": self.momentum, "expected_batch_size": self.rates[0][1], "members_sd": float(drift.std()),
            "noise_sd": float(base["sigma_hat"] * np.sqrt(np.sum(w**2))), "linearity_error": gap,
            "phases": observed_phases(base),
        }


class OpacusFinalCanaryParams(Params):
    """Settings of the final-model audit of a plug-in.

    Attributes:
        records: m canary records added to the training data (>= 2), each included with probability ½.
        dirac: Dirac gradient canaries at the optimizer (>= 0), or ``all``: one at every trainable coordinate not
            taken by a record or kept as a reference (``attacks.canaries.opacus.observer.references``).
        gradient_norm: the crafted gradients' raw norm in units of C (>= 1).
    """

    records: int = Field(500, ge=2)
    dirac: Annotated[int, Field(ge=0)] | Literal["all"] = "all"
    gradient_norm: float = Field(10.0, ge=1)


class OpacusFinalCanaryAudit(OpacusCanaryAudit):
    """One audit run of a plug-in mechanism that trains through Opacus, scored from its final model alone.

    Module docstring. Returns ``{"opacus-canary-final": the canary records, "opacus-canary-final-dirac": the optimizer's
    Dirac canaries}``; scores: larger means "included". Applies to mechanisms with a central-DP guarantee and no audit
    of their own (privbench's DP-SGD has ``canary-final``).
    """

    name = NAME
    Params = OpacusFinalCanaryParams

    def _job(self, ctx: AttackContext):
        p = self.params
        data, included = self._with_canaries(ctx, 10 + 4)
        request = FinalCanaries(p.records, -1 if p.dirac == "all" else p.dirac, ctx.seed, included, p.gradient_norm)
        return data, shadow_seed(ctx.seed, "canary", 10 + 5), request

    def score(self, ctx: AttackContext) -> dict[str, MembershipScores]:
        """Train the observed audit run and score its canaries from θ_T − θ_0 (Cebere et al. 2024, hidden state).

        Args:
            ctx: the cell's attack context.

        Returns:
            ``{"opacus-canary-final": (m,) scores, "opacus-canary-final-dirac": ...}``, each where it has at least 2
            canaries (larger: "included"); ``{}`` for a mechanism with its own audit.

        Raises:
            ValueError: every coin on one side; ``AuditRefused``: a loop the observer cannot read.
        """
        if self._own_audit(ctx):  # privbench's DP-SGD: canary-final
            return {}
        data, seed, request = self._job(ctx)
        run = ctx.train_like_target.audit_run(data, seed=seed, request=request)
        wb = run.audit
        facts = {"observations": "θ_T − θ_0 (the released model; θ_0: the mechanism's build after "
                                 "torch.manual_seed(seed), checked at the DPOptimizer's first step)",
                 "gradient_norm": request.norm,
                 **{k: wb[k] for k in ("sigma_hat", "claimed_sigma", "sample_rate", "steps", "lr", "momentum",
                                       "expected_batch_size", "members_sd", "noise_sd", "linearity_error")},
                 "observed_phases": wb.get("phases")}  # absent from an audit run cached before it was kept
        out = {}
        for key, part, what in ((NAME, "records", "records in the loop's own data pipeline"),
                                (f"{NAME}-dirac", "dirac", "Dirac gradients at the optimizer, sampled at the "
                                                           "accountant's q")):
            included = np.asarray(wb[part]["included"], np.int64)
            if len(included) < 2:
                continue
            out[key] = MembershipScores(
                np.asarray(wb[part]["scores"]), included, privacy=run.privacy,
                design=AuditDesign("one-run", "hidden-state", size=len(included), relation="add-remove"),
                extra={**facts, "canaries": what})
        return out
