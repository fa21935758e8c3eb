"""What the anchors' auditors share (``jax_privacy``, ``art``, ``mlpm``).

Finding the canary scores of the privbench audit that matches an anchor's threat model, the certified ε those scores are
held to, the split of the canaries into a half whose membership an attack may learn from and a half it is scored on, the
one-run bound privbench reads from an anchor's membership decisions, and the verdict. Nothing here estimates privacy the
way an anchor does: each anchor's own package does that (never a re-implementation of theirs).

The rule of every anchor's verdict: its value (an ε lower bound at 95 %) exceeds the certified ε of the audited run
under the neighbouring relation the canary design tests (``AttackRecord.held_to``: the audit run's privacy, else the
model's, stated under the design's relation — DP-SGD's canaries are add/remove). Where the run states no ε under
that relation there is no verdict (``caught`` False, said so in the text).
"""

from __future__ import annotations

import importlib.util
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from bench.zoo.api import Auditor, AuditorInput, Verdict

CONFIDENCE = 0.95
"""The coverage of every anchor's ε lower bound (significance 0.05)."""

WHITE_BOX = ("canary-whitebox", "opacus-canary", "opacus-canary-dirac")
"""White-box canary scores, in order of preference: privbench's DP-SGD gradient canaries, then the Opacus loop's
records and Dirac canaries (``attacks.canaries.opacus.audit``)."""
BLACK_BOX = ("dpmix-canary", "local-canary", "canary")
"""Black-box canary scores: the release audits where the run published a release, else the final model's loss on
input canaries (``attacks.canaries.canary``)."""

_SPLIT_SEED = 39  # the calibration / audit split of the canaries: fixed, and per run its seed


@dataclass(frozen=True)
class AnchorAuditor(Auditor):
    """An ``Auditor`` whose package needs more than one import.

    (``privacy-meter`` 1.0.1 imports TensorFlow and Opacus at import without declaring them.) ``also_requires`` are
    checked after ``requires``.
    """

    also_requires: tuple[str, ...] = ()

    def missing(self) -> str | None:
        """Why this auditor cannot run here (the first of its imports that is not installed), or None."""
        for name in (self.requires, *self.also_requires):
            if name is not None and importlib.util.find_spec(name) is None:
                return f"{name} is not installed"
        return None


@dataclass(frozen=True)
class Canaries:
    """One audit's canary scores (larger: "included"), its labels (1: included), the privbench record they came from.

    Its design's kind and relation, and the certified ε and δ the audit is held to (ε None: the run states none under
    that relation).
    """

    record: str
    scores: np.ndarray
    labels: np.ndarray
    kind: str
    relation: str | None
    epsilon: float | None
    delta: float
    seed: int

    def halves(self) -> tuple[np.ndarray, np.ndarray]:
        """Two boolean masks over the canaries.

        A random half (``calibration``: an attack may learn from their membership) and the rest (``audit``: scored).
        Drawn from the run's seed before any score is read, so each audit-half canary's inclusion stays an independent
        coin given the calibration half (the one-run theorems hold conditionally).

        Raises:
            ValueError: a half without both included and excluded canaries.
        """
        n = self.labels.size
        calibration = np.zeros(n, bool)
        calibration[np.random.default_rng([_SPLIT_SEED, self.seed]).permutation(n)[: n // 2]] = True
        for half in (calibration, ~calibration):
            if self.labels[half].min() == self.labels[half].max():
                raise ValueError(f"{self.record}: a half of its {n} canaries fell on one side of the coin")
        return calibration, ~calibration

    def verdict(self, value: float, what: str) -> Verdict:
        """Caught when ``value`` (an ε lower bound at 95 %) exceeds the certified ε; no verdict without one."""
        value = float(value)
        where = f"{self.record}, {self.kind}, m = {self.labels.size}"
        if self.epsilon is None:
            return Verdict(False, value, f"{what} = {value:.3g} ({where}); the run certifies no ε under "
                                         f"{self.relation}: no verdict")
        caught = value > self.epsilon
        cert = "∞" if math.isinf(self.epsilon) else f"{self.epsilon:.3g}"
        return Verdict(caught, value, f"{what} = {value:.3g} {'>' if caught else '≤'} certified ε = {cert} "
                                      f"({self.relation}, δ = {self.delta:.0e}; {where})")


def canaries(inp: AuditorInput, records: tuple[str, ...]) -> Canaries:
    """The first of ``records`` whose scores this run saved, with the certified ε its audit is held to.

    Raises:
        LookupError: none of ``records`` was saved (the run did not run the audit the anchor reads).
    """
    for name in records:
        if name not in inp.scores:
            continue
        scores, labels = (np.asarray(a) for a in inp.scores[name])
        record: Any = getattr(inp.target, "attacks", {}).get(name)
        if record is None:
            raise LookupError(f"scores of {name!r} were saved but the run has no record of that audit")
        held = record.held_to(inp.target.privacy)
        epsilon = None if held is None or held.epsilon is None else float(held.epsilon)
        delta = float(held.delta) if held is not None and held.delta else float(record.audit.delta)
        design = record.audit.design
        return Canaries(name, scores.astype(np.float64).ravel(), labels.astype(np.int64).ravel(), design.kind,
                        design.relation, epsilon, delta, int(getattr(inp.target, "seed", 0)))
    raise LookupError(f"none of {records} in this run's saved scores ({sorted(inp.scores) or 'none'})")


def one_run_bound(m: int, r: int, v: int, *, delta: float, confidence: float = CONFIDENCE) -> float:
    """Privbench's reading of an anchor's membership decisions.

    ``v`` correct of ``r`` guesses on ``m`` canaries with independent coins, as an ε lower bound at ``confidence``
    (Steinke, Nasr, Jagielski 2023; ``attacks.analysis.statistics.one_run``).
    """
    from attacks.analysis.statistics.one_run import one_run_epsilon

    return one_run_epsilon(m, r, v, delta=delta, confidence=confidence)


WHITE_BOX_ATTACKS = {"dpsgd": ("canary",), "opacus-example": ("opacus-canary",)}
"""The privbench attacks whose scores a white-box anchor reads, per zoo mechanism."""
BLACK_BOX_ATTACKS = {"dpsgd": ("canary",), "opacus-example": ("canary",), "dpmix": ("dpmix-canary",),
                     "local-gaussian": ("local-canary",)}
"""The privbench attacks whose scores a black-box anchor reads, per zoo mechanism (the releases' own audits)."""

__all__ = ["BLACK_BOX", "BLACK_BOX_ATTACKS", "CONFIDENCE", "WHITE_BOX", "WHITE_BOX_ATTACKS", "AnchorAuditor",
           "Canaries", "canaries", "one_run_bound"]
