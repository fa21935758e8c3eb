"""What ``privbench compare`` found.

One ``Change`` per metric of a matched cell, the cells of each NEW run against BASE (``CellComparison``), and the whole
``Comparison``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from bench.results import Results, RunResult

ALPHA = 0.05  # family-wise level over every comparison made (Holm)


@dataclass(frozen=True)
class CellKey:
    """What makes two models the same cell.

    Dataset, mechanism, target ε (the ε = ∞ point apart), seed (None: matched whatever the seed) and a reproduction's
    row.
    """

    dataset: str
    mechanism: str
    target: float | None
    off_point: bool
    seed: int | None
    row: str | None

    @staticmethod
    def of(r: RunResult, *, ignore_seed: bool = False) -> CellKey:
        """The key of model ``r`` (its seed None with ``ignore_seed``: matched whatever the seed)."""
        return CellKey(r.dataset, r.mechanism, r.target_epsilon, r.off_point, None if ignore_seed else r.seed, r.row)

    def label(self) -> str:
        """``"digits dpsgd target ε 4 seed 0"``."""
        target = "∞ (privacy off)" if self.off_point else "—" if self.target is None else f"{self.target:g}"
        row = f" row {self.row}" if self.row else ""
        seed = "any seed" if self.seed is None else f"seed {self.seed}"
        return f"{self.dataset} {self.mechanism} target ε {target} {seed}{row}"


@dataclass
class Change:
    """One metric of one cell, before and after, with its test.

    ``kind`` is what a ``--fail-on`` rule names (accuracy, tpr, auc, epsilon, audit, conformance, privacy-bug,
    degenerate, failed, throughput, settings); ``worse`` True for a regression, False for an improvement, None where
    the direction is neither; ``p`` the raw p-value and ``p_holm`` Holm's adjusted one (None for a difference that
    is exact, such as a changed ε, or one no test applies to); ``delta`` the difference in the metric's unit
    (points for accuracy and TPR, a ratio for throughput).
    """

    run: str
    cell: str
    metric: str
    kind: str
    before: str
    after: str
    delta: float | None = None
    test: str = ""
    p: float | None = None
    p_holm: float | None = None
    worse: bool | None = None
    exact: bool = False

    @property
    def significant(self) -> bool:
        """Whether the change is exact (a changed ε, a new privacy bug) or its Holm-adjusted p is below ``ALPHA``."""
        if self.exact:
            return True
        return self.p_holm is not None and self.p_holm < ALPHA

    @property
    def p_text(self) -> str:
        """``"p = 0.00023 Holm-adjusted (McNemar exact, ...; raw p = 1.9e-06)"``.

        ``"exact (no sampling)"`` or ``"no test"`` (after what was measured, e.g. a throughput ratio).
        """
        if self.exact:
            return "exact (no sampling)"
        if self.p_holm is None:
            return f"{self.test}, no test" if self.test else "no test"
        return f"p = {_p(self.p_holm)} Holm-adjusted ({self.test}; raw p = {_p(self.p or 1.0)})"

    def line(self) -> str:
        """The one line of a regression: run, cell, metric, before → after, p-value."""
        return f"regression: {self.run}: {self.cell}: {self.metric}: {self.before} → {self.after}, {self.p_text}"


def _p(p: float) -> str:
    return "1" if p >= 0.9995 else f"{p:.2g}" if p >= 1e-4 else f"{p:.1e}"


@dataclass
class CellComparison:
    """One cell matched in BASE and one NEW run.

    Both models, the settings that changed, and every metric's change (significant or not).
    """

    key: CellKey
    base: RunResult
    new: RunResult
    settings: list[str] = field(default_factory=list)
    changes: list[Change] = field(default_factory=list)
    throughput_ratio: float | None = None
    throughput_text: str = "—"


@dataclass
class RunComparison:
    """One NEW run against BASE: its matched cells and the cells found in one of the two only."""

    label: str
    doc: Results
    cells: list[CellComparison]
    only_base: list[CellKey]
    only_new: list[CellKey]
    run_settings: list[str] = field(default_factory=list)
    seed_changes: list[Change] = field(default_factory=list)


@dataclass
class Comparison:
    """BASE against every NEW run; ``tests`` counts the comparisons Holm's correction ran over."""

    base_label: str
    base: Results
    runs: list[RunComparison]
    tests: int = 0

    def changes(self) -> list[Change]:
        """Every change of every cell of every NEW run, and those over seeds (``reports.compare.seeds``)."""
        return [c for run in self.runs for c in run.seed_changes + [c for cell in run.cells for c in cell.changes]]

    def significant(self) -> list[Change]:
        """The changes that are exact or significant after Holm's correction, regressions first."""
        found = [c for c in self.changes() if c.significant]
        return sorted(found, key=lambda c: (c.worse is not True, c.worse is None, c.run, c.cell, c.metric))


def finite(x: float | None) -> bool:
    """Whether ``x`` is a finite number (None, NaN and ±inf are not measured)."""
    return x is not None and math.isfinite(x)
