"""The observer of the ``opacus-canary`` audit.

(``attacks.canaries.opacus.audit``, where the design and its assumptions are stated.) For the length of a plug-in's
``fit`` it patches Opacus' ``GradSampleModule.forward`` (which canary records each batch holds) and
``DPOptimizer.pre_step`` (the canaries' crafted gradients put in their per-sample rows before the user's optimizer clips
them, Dirac canaries at the accountant's rate q, and every noisy update read at the canaries' coordinates; Nasr et al.
2023, §3), and ``DPOptimizer.step``: a digest of every parameter and buffer the private steps find and leave, so that an
update outside them is caught (``attacks.canaries.opacus.patches``). One-line ``AuditRefused`` for a loop outside the
design.

Design notes: docs/design-notes.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from attacks.canaries.opacus.patches import OpacusPatches
from attacks.canaries.opacus.phases import (
    NOT_CERTIFIED,
    REFERENCES_PER_TENSOR,
    AuditRefused,
    Phase,
    base_clip,
    canary_records,
    log_likelihood_ratio,
    read_phase,
    references,
    row_keys,
    same_parameters,
)
from attacks.membership.shadows import shadow_seed
from bench.core.data import ArrayDataset
from mechanisms.post_processing import declared

__all__ = ["NOT_CERTIFIED", "REFERENCES_PER_TENSOR", "AuditRefused", "OpacusCanaries", "OpacusObserver",
           "canary_records", "log_likelihood_ratio", "references"]


@dataclass(frozen=True)
class OpacusCanaries:
    """The ``opacus-canary`` audit run's request: canary records and Dirac gradient canaries.

    The audit run's request: ``records`` canary records (their inclusion coins ``included``, drawn by the attack
    before the run; their images ``keys`` identify them in a batch) and ``dirac`` Dirac gradient canaries at the
    optimizer (coins drawn with ``seed``; -1: one at every coordinate not taken by a record or kept as a reference,
    ``references``), raw norm ``norm``·C (>= 1). The run's data hold every canary record, included or not.
    """

    records: int
    dirac: int
    seed: int
    included: tuple[bool, ...]
    norm: float = 10.0

    def observe(self, data: ArrayDataset, **run) -> OpacusObserver:
        """The run's ``OpacusObserver``; ``run``'s ``mechanism``, ``spec`` declare post-processing (or ValueError)."""
        images = canary_records(self.records, data.input_shape, data.num_classes, self.seed)[0]
        post = declared(run.get("mechanism"), run.get("spec"))
        return OpacusObserver(self, images, records_total=len(data), post=post)


class OpacusObserver(OpacusPatches):
    """Patches Opacus while the audit run trains (``attacks.canaries.opacus.patches``; see the module docstring).

    ``result()`` gives the scores and the parameter trail. Raises ``AuditRefused`` (one line) for a loop outside the
    design.

    Args:
        request: the audit run's ``OpacusCanaries``.
        images: the canary records' images ``(records, ...)``, recognised in batches by their bytes.
        records_total: n, the training records given to ``fit`` (members and every canary record).
        post: the mechanism's declared post-processing (``mechanisms.post_processing.declared``).
    """

    def __init__(self, request: OpacusCanaries, images: torch.Tensor, *, records_total: int = 0,
                 post: tuple[float | None, str, list[str]] = (None, "step", [])) -> None:
        super().__init__(post)
        self.request, self.keys = request, {k: i for i, k in enumerate(row_keys(images))}
        self.records_total = records_total  # n: the training records given to fit (members + every canary record)
        self.batch_rows = 0  # rows of every batch, summed over the steps
        self.largest_clip: float | None = None  # the largest clipped canary contribution per row, units of C
        self.rows: list[int] = []  # canary index (or -1) of each row fed to the model since the last step
        self.x: list[np.ndarray] = []  # per step: (records + dirac + refs,) observations, in units of C
        self.hits: list[np.ndarray] = []  # per step: (records,) times each canary record was in the batch
        self.opt = None
        self.error: AuditRefused | None = None
        self.phases: list[Phase] = []  # every DPOptimizer the loop stepped, in the order of their first steps
        self.step_phase: list[int] = []  # per step: its phase

    def _rows(self, x: torch.Tensor | None) -> None:
        self.rows = [] if x is None else self.rows + [self.keys.get(k, -1) for k in row_keys(x)]

    several = True  # a loop may step several DPOptimizers (its phases); the final-model audit observes one

    def _setup(self, opt) -> None:
        phase = read_phase(opt)
        params = opt.params
        sizes = [p.numel() for p in params]
        r, d = self.request.records, self.request.dirac
        refs = references(sizes)
        if d < 0:  # as many Dirac canaries as the model holds, beside the records and the reference coordinates
            d = max(0, sum(sizes) - r - sum(refs))
        self.d = d
        if sum(sizes) < r + d + sum(refs):
            raise AuditRefused(
                f"opacus-canary: {r + d} canaries need as many coordinates and {sum(refs)} more for the noise of "
                f"each parameter tensor; the model has {sum(sizes)} trainable ones"
            )
        gen = torch.Generator().manual_seed(shadow_seed(self.request.seed, "canary", 10 + 1))
        bounds = np.cumsum([0, *sizes])
        perm = torch.randperm(sum(sizes), generator=gen).numpy()
        owner = np.searchsorted(bounds, perm, side="right") - 1
        is_ref = np.zeros(len(perm), bool)
        for k, count in enumerate(refs):  # each tensor's first ``count`` coordinates in the random order
            is_ref[np.flatnonzero(owner == k)[:count]] = True
        flat = np.concatenate([perm[~is_ref][: r + d], perm[is_ref]])
        self.ref_tensor = owner[is_ref]  # the parameter tensor of each reference column
        self.shapes = [list(p.shape) for p in params]
        owner = np.searchsorted(bounds, flat, side="right") - 1
        self.where = [(k, np.flatnonzero(owner == k), flat[owner == k] - bounds[k]) for k in np.unique(owner)]
        self.dirac_in = (torch.rand(d, generator=gen) < 0.5).numpy()
        self.gen, self.first = gen, list(params)
        self._enter(phase)

    def _enter(self, phase: Phase) -> None:
        """Make ``phase`` the one the next step belongs to (a new one is appended to ``phases``)."""
        if all(p is not phase for p in self.phases):
            self.phases.append(phase)
        self.phase, self.opt, self.accountant = phase, phase.opt, phase.accountant
        self.q, self.sigma, self.C = phase.q, phase.sigma, phase.clip

    def _switch(self, opt) -> None:
        """The step of another DPOptimizer than the last one's.

        A phase seen before, or a new one on the same parameters. Raises ``AuditRefused`` where this observer observes
        one optimizer, or other parameters.
        """
        known = next((p for p in self.phases if p.opt is opt), None)
        if known is None:
            if not self.several:
                raise AuditRefused("opacus-canary: the loop steps more than one DPOptimizer; the audit observes one")
            known = read_phase(opt)
            known.order = same_parameters(self.first, opt)
        self._enter(known)

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
            self._switch(opt)
        if opt._check_skip_next_step(pop_next=False):
            raise AuditRefused(
                "opacus-canary: the loop skips steps (BatchMemoryManager or gradient accumulation); "
                "the audit needs one optimizer step per batch"
            )
        params, rows = self.phase.params(), np.asarray(self.rows, dtype=np.int64)
        self.batch_rows += len(rows)
        self.phase.batch_rows += len(rows)
        self.phase.steps += 1
        self.step_phase.append(self.phases.index(self.phase))
        self.rows = []
        full = [opt._get_flat_grad_sample(p) for p in params]
        if len(full[0]) != len(rows):
            raise AuditRefused(
                f"opacus-canary: the model's forward saw {len(rows)} training rows but the step holds "
                f"{len(full[0])} per-sample gradients; the audit needs one forward per batch"
            )
        self._begin(opt, params)  # the parameters this private step finds (the trail's continuity)
        r = self.request.records
        is_canary = torch.from_numpy(rows >= 0)
        for p, g in zip(params, full, strict=True):  # pass 1: the members' rows alone, by the user's clipping
            p.grad_sample = g.masked_fill(is_canary.view(-1, *[1] * (g.dim() - 1)).to(g.device), 0.0)
        base_clip()(opt)
        members = self._read([p.summed_grad for p in params])
        hits = np.bincount(rows[rows >= 0], minlength=r)
        sampled_dirac = np.flatnonzero((torch.rand(self.d, generator=self.gen) < self.q).numpy() & self.dirac_in)
        records = rows[rows >= 0]
        records = records[np.asarray(self.request.included, bool)[records]]  # an excluded record's gradient: zero
        canaries = np.concatenate([records, r + sampled_dirac])  # one crafted gradient per row
        rows_of = [np.zeros((len(canaries), p.numel()), np.float32) for p in params]
        for k, ids, idx in self.where:
            for j, c in enumerate(canaries):
                hit = np.flatnonzero(ids == c)
                if len(hit):
                    rows_of[k][j, idx[hit[0]]] = self.request.norm * self.C
        for p, g in zip(params, rows_of, strict=True):  # pass 2: the canaries' rows, by the user's clipping again
            p.grad_sample = torch.from_numpy(g).to(p.device, p.dtype).view(len(canaries), *p.shape)
        base_clip()(opt)
        self._clipped(np.bincount(canaries, minlength=r + self.d), members)
        opt._check_skip_next_step()  # pops the flag, as pre_step does
        opt.add_noise()
        noisy = self._read([p.grad for p in params])
        self.members = members  # the members' clipped sum at the observed coordinates (this step)
        self.x.append(((noisy - members) / self.C).astype(np.float32))
        self.hits.append(hits.astype(np.int16))
        opt.scale_grad()
        if opt.step_hook:
            opt.step_hook(opt)
        opt._is_last_step_skipped = False
        return True

    def _clipped(self, count: np.ndarray, members: np.ndarray) -> None:
        """The largest clipped canary contribution per row this step, units of C.

        (``count``: rows per canary; ``members``: the members' clipped sum, which the canaries' pass accumulated onto.)
        """
        at = np.flatnonzero(count)
        if len(at):
            got = (self._read([p.summed_grad for p in self.phase.params()]) - members)[at] / (count[at] * self.C)
            self.largest_clip = max(self.largest_clip or 0.0, float(np.max(np.abs(got))))
            self.phase.largest_clip = max(self.phase.largest_clip or 0.0, float(np.max(np.abs(got))))

    def result(self, model=None) -> dict:
        """The audit's JSON-able record.

        JSON-able: ``{"records": {"scores", "included"}, "dirac": {...}, "hits": (records,) counts over the
        steps, "steps", "sample_rate", "sigma_hat", "claimed_sigma", "noise_by_tensor": [{"shape", "sum_squares",
        "n"}] (reference noise, units of C), "batch_rows", "records_total", "largest_clip" (units of C),
        "clip_bound", "history" ([σ, q, steps] as accounted), "accountant", "phases", "continuity"}``: the first
        phase's fields (the steps and hits of all of them), ``phases`` one such record per DPOptimizer the loop
        stepped (``Phase.summary``, with its ``noise_by_tensor``, ``hits`` and ``sigma_hat``), ``continuity`` the
        parameter trail's record (``ParameterTrail.finish``). Scores sum every phase's log-likelihood ratios, each at
        its own q and measured σ̂.

        Args:
            model: what ``fit`` returned (None: the trained module as it is now).

        Returns:
            That dict (scores: larger means "included").

        Raises:
            AuditRefused: the loop was refused while observed, no DPOptimizer stepped, or no canary record reached
                the model.
        """
        if self.error is not None:
            raise self.error
        if self.opt is None or not self.x:
            raise AuditRefused("opacus-canary: the mechanism's fit never stepped an Opacus DPOptimizer; the audit "
                               "observes a loop made by PrivacyEngine.make_private*")
        r, d, inc = self.request.records, self.d, np.asarray(self.request.included, bool)
        hits = np.stack(self.hits).sum(0)
        if hits.sum() == 0:
            raise AuditRefused("opacus-canary: none of the canary records reached the model's forward as given; "
                               "the audit needs the loop to feed the training records unchanged")
        x, which = np.stack(self.x).astype(np.float64), np.asarray(self.step_phase)
        phases, scores = [], np.zeros(r + d)
        for i, phase in enumerate(self.phases):
            xi = x[which == i]
            sigma = float(np.sqrt(np.mean(xi[:, r + d:] ** 2))) if x.shape[1] > r + d else phase.sigma
            scores += log_likelihood_ratio(xi[:, : r + d], q=phase.q, sigma=sigma)
            phases.append({**phase.summary(), "sigma_hat": sigma, "hits": np.stack(self.hits)[which == i].sum(0)
                           .tolist(), "noise_by_tensor": self._tensors(xi[:, r + d:])})
        first = phases[0]
        return {
            "records": {"scores": scores[:r].tolist(), "included": inc.astype(int).tolist()},
            "dirac": {"scores": scores[r:].tolist(), "included": self.dirac_in.astype(int).tolist()},
            "hits": hits.tolist(), "steps": len(self.x), "sample_rate": first["sample_rate"],
            "sigma_hat": first["sigma_hat"], "claimed_sigma": first["claimed_sigma"],
            "noise_by_tensor": first["noise_by_tensor"], "batch_rows": first["batch_rows"],
            "records_total": self.records_total, "largest_clip": first["largest_clip"],
            "clip_bound": first["clip_bound"], "history": first["history"], "accountant": first["accountant"],
            "phases": phases, "continuity": self.continuity(model),
        }

    def _tensors(self, noise: np.ndarray) -> list[dict]:
        """Σ noise² and the observations per parameter tensor (``noise``: ``(T, references)``, units of C)."""
        return [{"shape": shape, "sum_squares": float(np.sum(noise[:, self.ref_tensor == k] ** 2)),
                 "n": int(noise[:, self.ref_tensor == k].size)} for k, shape in enumerate(self.shapes)]
