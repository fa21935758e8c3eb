"""White-box audit of any plug-in whose training goes through Opacus' ``DPOptimizer``, the user's code unchanged
(Nasr et al. 2023, "Tight Auditing of Differentially Private Machine Learning", §3: crafted-gradient and Dirac
canaries; Steinke, Nasr, Jagielski 2023: one training run).

During the audit run privbench patches two Opacus methods for the length of ``fit`` (``OpacusObserver``):
``GradSampleModule.forward``, to see which records each training batch holds, and ``DPOptimizer.pre_step``, to see
every noisy update. Two kinds of canaries, m each, each included with probability ½:

- **canary records** (``records``): extra training records, at random positions among the members, that go through
  the user's own ``DataLoader`` — so they are sampled exactly as the loop samples (Poisson, shuffled, weighted…).
  Whenever one is in a batch its per-sample gradient is replaced, before the user's optimizer clips it, by a crafted
  gradient known by construction: zero except ``norm``·C at one coordinate of its own (Nasr et al.'s Dirac gradient).
- **Dirac gradient canaries at the optimizer** (``dirac``): the same crafted gradients, sampled by privbench at the
  accountant's rate q, so they test the noise and clipping alone.

Both are clipped by the user's optimizer (``clip_and_accumulate``, run once for the members and once for the
canaries: the clipping is per sample, so the sum is the same) and noised by its ``add_noise``. The auditor, knowing
every other record's clipped contribution (the worst case DP guards against), reads at each canary's coordinate
x_t = (noisy sum − the members' clipped sum) / C = (the canary's clipped contribution)/C + N(0, σ²), and scores the
canary by the Neyman-Pearson log-likelihood ratio of Poisson sampling at the accountant's q,
Σ_t log(1 − q + q·exp((2x_t − 1)/(2σ̂²))), σ̂ measured on coordinates without a canary (as
``mechanisms.dpsgd_canaries``). A loop that samples records more often than q gives its canary records more hits.

The canary records also test the sampling itself: their participation counts over the T steps are, for the
accountant's Poisson sampling at rate q, iid Binomial(T, q). ``sampling_test`` compares the included records' total
and the dispersion of their counts with that law (a simulation of it, two-sided): shuffled fixed-size batches (each
record once per epoch: no dispersion) and a weighted sampler (rates that differ: too much) are refuted there, which
ends the run with exit 3 like an ε lower bound above ε (``bench.runner.bugs``).

What the design assumes of the user's loop, refused in one line otherwise: the model is wrapped by Opacus'
``GradSampleModule`` (``grad_sample_mode`` ``hooks`` or ``functorch``) and trained by a ``DPOptimizer`` made by a
``PrivacyEngine`` (its accountant's q is read from the optimizer's step hook), with flat clipping (the base
``clip_and_accumulate``); one forward/backward and one ``step`` per batch (no ``BatchMemoryManager``, no gradient
accumulation); the batch reaches the model's forward as the training records were given (no transform inside the
loop); the model has at least 2m + 1 trainable coordinates. The audit run's q and T come from the user's loader on
members + included canary records: with ⌈n/b⌉ batches, they change only if the included count crosses a multiple of
the batch size (a small dependence on the coins that the one-run theorems exclude; the canary attack fixes a public n
for privbench's own DP-SGD, which a user's loop cannot be told).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import numpy as np
import torch
from pydantic import Field

from attacks.base import AttackContext, AuditDesign, MembershipAttack, MembershipScores
from attacks.shadows import shadow_seed
from bench.core.data import ArrayDataset, concat
from bench.core.params import Params

REFERENCE_COORDINATES = 1000  # coordinates without a canary: the noise the updates really carry
NULL_DRAWS = 20_000  # simulations of the ideal Poisson sampling for the sampling test


class AuditRefused(ValueError):
    """The user's loop is not one this audit can observe (one line: what it assumes, and what it saw)."""


@dataclass(frozen=True)
class OpacusCanaries:
    """The audit run's request: ``records`` canary records (their inclusion coins ``included``, drawn by the attack
    before the run; their images ``keys`` identify them in a batch) and ``dirac`` Dirac gradient canaries at the
    optimizer (coins drawn with ``seed``), raw norm ``norm``·C (>= 1)."""

    records: int
    dirac: int
    seed: int
    included: tuple[bool, ...]
    norm: float = 10.0

    def observe(self, data: ArrayDataset) -> OpacusObserver:
        """The context that observes the run's Opacus optimizer while ``fit`` trains on ``data``."""
        return OpacusObserver(self, canary_records(self.records, data.input_shape, data.num_classes, self.seed)[0])


def canary_records(
    m: int, input_shape: tuple[int, ...], num_classes: int, seed: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """m canary records: images ``(m, *input_shape)`` uniform in [0, 1] (distinct from every natural record with
    probability 1) and labels ``(m,)``, drawn with ``seed``."""
    gen = torch.Generator().manual_seed(shadow_seed(seed, "canary", 10 + 0))
    return torch.rand((m, *input_shape), generator=gen), torch.randint(0, num_classes, (m,), generator=gen)


def _row_keys(x: torch.Tensor) -> list[bytes]:
    return [row.tobytes() for row in x.detach().cpu().float().reshape(len(x), -1).numpy()]


class OpacusObserver(contextlib.AbstractContextManager):
    """Patches Opacus' ``GradSampleModule.forward`` and ``DPOptimizer.pre_step`` while the audit run trains (see the
    module docstring); ``result()`` gives the scores. Raises ``AuditRefused`` (one line) for a loop outside the
    design."""

    def __init__(self, request: OpacusCanaries, images: torch.Tensor) -> None:
        self.request, self.keys = request, {k: i for i, k in enumerate(_row_keys(images))}
        self.rows: list[int] = []  # canary index (or -1) of each row fed to the model since the last step
        self.x: list[np.ndarray] = []  # per step: (records + dirac + refs,) observations, in units of C
        self.hits: list[np.ndarray] = []  # per step: (records,) times each canary record was in the batch
        self.opt = None
        self.error: AuditRefused | None = None

    def __enter__(self) -> OpacusObserver:
        from opacus import GradSampleModule
        from opacus.optimizers import DPOptimizer

        self._saved = (GradSampleModule.forward, DPOptimizer.pre_step)
        forward, pre_step = self._saved
        obs = self

        def observed_forward(module, *args, **kwargs):
            if torch.is_grad_enabled() and args and isinstance(args[0], torch.Tensor):
                obs.rows += [obs.keys.get(k, -1) for k in _row_keys(args[0])]
            return forward(module, *args, **kwargs)

        def observed_pre_step(opt, closure=None):
            if obs.error is not None:
                raise obs.error
            try:
                return obs._step(opt)
            except AuditRefused as exc:
                obs.error = exc
                raise

        GradSampleModule.forward, DPOptimizer.pre_step = observed_forward, observed_pre_step
        return self

    def __exit__(self, *exc) -> None:
        from opacus import GradSampleModule
        from opacus.optimizers import DPOptimizer

        GradSampleModule.forward, DPOptimizer.pre_step = self._saved

    def _setup(self, opt) -> None:
        hook = opt.step_hook
        cells = (
            dict(
                zip(
                    getattr(hook, "__code__", None).co_freevars,
                    [c.cell_contents for c in hook.__closure__],
                    strict=True,
                )
            )
            if getattr(hook, "__closure__", None)
            else {}
        )
        if "sample_rate" not in cells:
            raise AuditRefused(
                "opacus-canary: the DPOptimizer has no accountant step hook (it was not made by "
                "PrivacyEngine.make_private*); the audit reads the accountant's sample rate there"
            )
        if type(opt).clip_and_accumulate is not _base_clip():
            raise AuditRefused(
                f"opacus-canary: {type(opt).__name__} clips per layer or per device; the audit "
                "supports the flat clipping of DPOptimizer"
            )
        params = opt.params
        sizes = [p.numel() for p in params]
        r, d = self.request.records, self.request.dirac
        if sum(sizes) < r + d + 1:
            raise AuditRefused(
                f"opacus-canary: {r + d} canaries need as many coordinates and one for the noise; the "
                f"model has {sum(sizes)} trainable ones"
            )
        gen = torch.Generator().manual_seed(shadow_seed(self.request.seed, "canary", 10 + 1))
        refs = min(REFERENCE_COORDINATES, sum(sizes) - r - d)
        flat = torch.randperm(sum(sizes), generator=gen)[: r + d + refs].numpy()
        bounds = np.cumsum([0, *sizes])
        owner = np.searchsorted(bounds, flat, side="right") - 1
        self.where = [(k, np.flatnonzero(owner == k), flat[owner == k] - bounds[k]) for k in np.unique(owner)]
        self.dirac_in = (torch.rand(d, generator=gen) < 0.5).numpy()
        self.gen, self.opt, self.q = gen, opt, float(cells["sample_rate"])
        self.sigma, self.C = float(opt.noise_multiplier), float(opt.max_grad_norm)

    def _read(self, tensors: list[torch.Tensor]) -> np.ndarray:
        out = np.zeros(sum(len(ids) for _, ids, _ in self.where))
        for k, ids, idx in self.where:
            out[ids] = tensors[k].reshape(-1)[torch.from_numpy(idx)].double().cpu().numpy()
        return out

    def _step(self, opt) -> bool:
        """DPOptimizer.pre_step with the canaries: members clipped, canaries clipped, noise, observation, scaling."""
        if opt.grad_samples is None or len(opt.grad_samples) == 0:
            return True
        if self.opt is None:
            self._setup(opt)
        elif opt is not self.opt:
            raise AuditRefused("opacus-canary: the loop steps more than one DPOptimizer; the audit observes one")
        if opt._check_skip_next_step(pop_next=False):
            raise AuditRefused(
                "opacus-canary: the loop skips steps (BatchMemoryManager or gradient accumulation); "
                "the audit needs one optimizer step per batch"
            )
        params, rows = opt.params, np.asarray(self.rows, dtype=np.int64)
        self.rows = []
        full = [opt._get_flat_grad_sample(p) for p in params]
        if len(full[0]) != len(rows):
            raise AuditRefused(
                f"opacus-canary: the model's forward saw {len(rows)} training rows but the step holds "
                f"{len(full[0])} per-sample gradients; the audit needs one forward per batch"
            )
        r = self.request.records
        is_canary = torch.from_numpy(rows >= 0)
        for p, g in zip(params, full, strict=True):  # pass 1: the members' rows alone, by the user's clipping
            p.grad_sample = g.masked_fill(is_canary.view(-1, *[1] * (g.dim() - 1)).to(g.device), 0.0)
        _base_clip()(opt)
        members = self._read([p.summed_grad for p in params])
        hits = np.bincount(rows[rows >= 0], minlength=r)
        sampled_dirac = np.flatnonzero(
            (torch.rand(self.request.dirac, generator=self.gen) < self.q).numpy() & self.dirac_in
        )
        canaries = np.concatenate([rows[rows >= 0], r + sampled_dirac])  # one crafted gradient per row
        rows_of = [np.zeros((len(canaries), p.numel()), np.float32) for p in params]
        for k, ids, idx in self.where:
            for j, c in enumerate(canaries):
                hit = np.flatnonzero(ids == c)
                if len(hit):
                    rows_of[k][j, idx[hit[0]]] = self.request.norm * self.C
        for p, g in zip(params, rows_of, strict=True):  # pass 2: the canaries' rows, by the user's clipping again
            p.grad_sample = torch.from_numpy(g).to(p.device, p.dtype).view(len(canaries), *p.shape)
        _base_clip()(opt)
        opt._check_skip_next_step()  # pops the flag, as pre_step does
        opt.add_noise()
        noisy = self._read([p.grad for p in params])
        self.x.append(((noisy - members) / self.C).astype(np.float32))
        self.hits.append(hits.astype(np.int16))
        opt.scale_grad()
        if opt.step_hook:
            opt.step_hook(opt)
        opt._is_last_step_skipped = False
        return True

    def result(self) -> dict:
        """JSON-able: ``{"records": {"scores", "included"}, "dirac": {...}, "hits": (records,) counts over the
        steps, "steps", "sample_rate", "sigma_hat", "claimed_sigma"}``. Raises ``AuditRefused`` when no DPOptimizer
        stepped, or no included canary record ever reached the model."""
        if self.error is not None:
            raise self.error
        if self.opt is None or not self.x:
            raise AuditRefused(
                "opacus-canary: the mechanism's fit never stepped an Opacus DPOptimizer; the audit "
                "observes a loop made by PrivacyEngine.make_private*"
            )
        r, d, inc = self.request.records, self.request.dirac, np.asarray(self.request.included, bool)
        hits = np.stack(self.hits).sum(0)
        if inc.any() and hits[inc].sum() == 0:
            raise AuditRefused(
                "opacus-canary: none of the included canary records reached the model's forward as "
                "given; the audit needs the loop to feed the training records unchanged"
            )
        x = np.stack(self.x).astype(np.float64)
        sigma = float(np.sqrt(np.mean(x[:, r + d :] ** 2))) if x.shape[1] > r + d else self.sigma
        scores = log_likelihood_ratio(x[:, : r + d], q=self.q, sigma=sigma)
        return {
            "records": {"scores": scores[:r].tolist(), "included": inc.astype(int).tolist()},
            "dirac": {"scores": scores[r:].tolist(), "included": self.dirac_in.astype(int).tolist()},
            "hits": hits.tolist(),
            "steps": len(self.x),
            "sample_rate": self.q,
            "sigma_hat": sigma,
            "claimed_sigma": self.sigma,
        }


def _base_clip():
    from opacus.optimizers import DPOptimizer

    return DPOptimizer.clip_and_accumulate


def log_likelihood_ratio(x: np.ndarray, *, q: float, sigma: float) -> np.ndarray:
    """Per canary, Σ_t log(1 − q + q·exp((2x_t − 1)/(2σ²))) for observations ``x`` ``(T, m)`` in units of C: the
    log-likelihood ratio of "sampled at rate q, contributing 1" vs "absent" under N(·, σ²) noise (Σ_t x_t when σ = 0).
    Returns ``(m,)``."""
    if sigma <= 1e-12:
        return x.sum(0)
    z = (2 * x - 1) / (2 * sigma**2)
    return (np.logaddexp(np.log1p(-q), np.log(q) + z) if q < 1 else z).sum(0)


def sampling_test(hits: np.ndarray, *, steps: int, q: float, seed: int = 0, draws: int = NULL_DRAWS) -> dict:
    """Do ``hits`` ``(m,)`` — each included canary record's participation count over ``steps`` — follow Poisson
    sampling at rate q (iid Binomial(steps, q)), as the accountant assumes?

    Two statistics, each two-sided against ``draws`` simulations of the ideal sampling (no approximation): the total
    Σ hits (the rate) and the dispersion Σ (hits − steps·q)² (shuffled batches give every record the same count; a
    weighted sampler spreads them). Returns ``{"p_value"`` (the smaller p, ×2 for the two statistics), ``"rate"``
    (observed per-step rate), ``"dispersion"`` (observed / expected), ``"assumed"``}``. Raises ValueError for no
    record."""
    hits = np.asarray(hits, np.float64)
    if not len(hits):
        raise ValueError("the sampling test needs at least one included canary record")
    rng = np.random.default_rng(seed)
    null = rng.binomial(steps, q, size=(draws, len(hits))).astype(np.float64)
    mean = steps * q

    def two_sided(observed: float, sims: np.ndarray) -> float:
        lo, hi = (1 + np.sum(sims <= observed)) / (draws + 1), (1 + np.sum(sims >= observed)) / (draws + 1)
        return min(1.0, 2 * min(lo, hi))

    total = two_sided(hits.sum(), null.sum(1))
    spread = two_sided(((hits - mean) ** 2).sum(), ((null - mean) ** 2).sum(1))
    return {
        "p_value": min(1.0, 2 * min(total, spread)),
        "rate": float(hits.sum() / (steps * len(hits))),
        "dispersion": float(((hits - mean) ** 2).mean() / (mean * (1 - q))),
        "assumed": f"Poisson sampling at q = {q:.4g} over T = {steps} steps",
    }


class OpacusCanaryParams(Params):
    """Settings of the Opacus plug-in audit.

    Attributes:
        records: m canary records added to the training data (>= 2), each included with probability ½.
        dirac: Dirac gradient canaries at the optimizer (>= 0).
        gradient_norm: the crafted gradients' raw norm in units of C (>= 1).
    """

    records: int = Field(500, ge=2)
    dirac: int = Field(2000, ge=0)
    gradient_norm: float = Field(10.0, ge=1)


class OpacusCanaryAudit(MembershipAttack):
    """One audit run of a plug-in mechanism that trains through Opacus, observed white-box (module docstring).
    Returns ``{"opacus-canary": the canary records (their sampling test in ``extra``), "opacus-canary-dirac": the
    optimizer's Dirac canaries}``; scores: larger means "included". Applies to mechanisms with a central-DP guarantee
    and no white-box audit of their own (privbench's DP-SGD has ``gradient-canaries``)."""

    audit = True
    name = "opacus-canary"
    Params = OpacusCanaryParams

    def applies_to(self, target) -> bool:
        return target.privacy.guarantee == "central-dp"

    @staticmethod
    def _own_audit(ctx: AttackContext) -> bool:
        """The mechanism has its own white-box audit (privbench's DP-SGD: the canary attack's gradient canaries)."""
        from mechanisms import MECHANISMS

        return ctx.mechanism in MECHANISMS.names() and bool(MECHANISMS.get(ctx.mechanism).audits)

    def _job(self, ctx: AttackContext):
        p, members = self.params, ctx.split.members
        gen = torch.Generator().manual_seed(shadow_seed(ctx.seed, "canary", 10 + 2))
        included = (torch.rand(p.records, generator=gen) < 0.5).numpy()
        if included.all() or not included.any():
            raise ValueError(f"opacus-canary: all {p.records} canary records fell on one side of the coin")
        x, y = canary_records(p.records, members.input_shape, members.num_classes, ctx.seed)
        keep = torch.from_numpy(np.flatnonzero(included))
        data = concat(members, ArrayDataset(x[keep], y[keep], members.num_classes, members.name))
        data = data.subset(torch.randperm(len(data), generator=gen))  # canaries at random positions
        request = OpacusCanaries(p.records, p.dirac, ctx.seed, tuple(bool(b) for b in included), p.gradient_norm)
        return data, shadow_seed(ctx.seed, "canary", 10 + 3), request

    def prefetch(self, ctx: AttackContext) -> None:
        if self._own_audit(ctx):
            return
        data, seed, request = self._job(ctx)
        ctx.train_like_target.prefetch([(data, seed, request)])

    def score(self, ctx: AttackContext) -> dict[str, MembershipScores]:
        if self._own_audit(ctx):  # audited by its own white-box design (the canary attack); nothing to add
            return {}
        data, seed, request = self._job(ctx)
        run = ctx.train_like_target.audit_run(data, seed=seed, request=request)
        wb = run.audit
        inc = np.asarray(wb["records"]["included"], bool)
        test = sampling_test(np.asarray(wb["hits"])[inc], steps=wb["steps"], q=wb["sample_rate"], seed=ctx.seed)
        facts = {
            "observations": "every noisy update of the loop's DPOptimizer",
            "gradient_norm": request.norm,
            "sigma_hat": wb["sigma_hat"],
            "claimed_sigma": wb["claimed_sigma"],
            "steps": wb["steps"],
            "sample_rate": wb["sample_rate"],
        }
        out = {
            self.name: MembershipScores(
                np.asarray(wb["records"]["scores"]),
                inc.astype(np.int64),
                privacy=run.privacy,
                design=AuditDesign("one-run", "white-box", size=request.records, relation="add-remove"),
                extra={**facts, "canaries": "records in the loop's own data pipeline", "sampling_test": test},
            )
        }
        if request.dirac:
            out[f"{self.name}-dirac"] = MembershipScores(
                np.asarray(wb["dirac"]["scores"]),
                np.asarray(wb["dirac"]["included"], np.int64),
                privacy=run.privacy,
                design=AuditDesign("one-run", "white-box", size=request.dirac, relation="add-remove"),
                extra={**facts, "canaries": "Dirac gradients at the optimizer, sampled at the accountant's q"},
            )
        return out
