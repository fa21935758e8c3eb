"""Whether a membership attack beats chance, corrected for picking the best of many.

Each (model, membership attack, FPR level) with a measurable TPR is one comparison. Its p-value is exact under
the null "the attack's scores carry no membership signal" (members' and non-members' scores exchangeable): the
TPR at FPR ≤ f is read at the (L+1)-th highest non-member score, L = ⌊f·n_non_members⌋, so k or more members lie
above it exactly when the top k + L scores hold at most L non-members, i.e. with the hypergeometric probability
P[Hyp(N, n_members, k + L) ≥ k]. This accounts for the noise in the FPR as well as in the TPR. A report calls a
TPR "above chance" only when p ≤ 0.05 / M, M the number of comparisons in the document (Bonferroni: the chance that
any such call is a false alarm is at most 5 %). Audits (canaries) are not in the family: their evidence is their
ε lower bound (``reports.bounds``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scipy.stats import hypergeom

from bench.results import AttackRecord, Results, RunResult, TprAtFpr
from reports.common import format_tpr, level_label, measurable_tpr, membership_attacks

ALPHA = 0.05  # family-wise error of every "beats chance" statement


def chance_p_value(entry: TprAtFpr, n_members: int, n_non_members: int) -> float:
    """Exact P[Hyp(m + n, m, k + L) ≥ k] of a TPR at ``entry.fpr`` against no membership signal (see the module).

    k = round(TPR·m) of m = ``n_members``, L = ⌊fpr·n⌋ of n = ``n_non_members`` (the most false positives); 1 at k = 0.
    """
    k = round(float(entry.tpr or 0.0) * n_members)
    if k <= 0:
        return 1.0
    fp = math.floor(entry.fpr * n_non_members * (1.0 + 1e-12))
    return float(hypergeom.sf(k - 1, n_members + n_non_members, n_members, k + fp))


@dataclass(frozen=True)
class ChanceTest:
    """One comparison: a model's membership attack at one FPR level, its TPR entry and exact p-value."""

    result: RunResult
    attack: str
    level: float
    entry: TprAtFpr
    p_value: float

    def detail(self) -> str:
        """``"TPR 1.5% [1.3, 1.8] at 0.1% FPR, 15× chance, p = 2.9e-25"``."""
        ratio = float(self.entry.tpr or 0.0) / self.level
        return (f"TPR {format_tpr(self.entry)} at {level_label(self.level)} FPR, {ratio:.2g}× chance, "
                f"p = {self.p_value:.2g}")

    def text(self) -> str:
        """``"loss, TPR 1.5% [1.3, 1.8] at 0.1% FPR, 15× chance, p = 2.9e-25"``."""
        return f"{self.attack}, {self.detail()}"


def _tests(r: RunResult, name: str, a: AttackRecord) -> list[ChanceTest]:
    out = []
    for entry in a.metrics.tpr_at_fpr.values():
        if measurable_tpr(entry):
            out.append(ChanceTest(r, name, float(entry.fpr), entry,
                                  chance_p_value(entry, a.n_members, a.n_non_members)))
    return out


@dataclass(frozen=True)
class ChanceFamily:
    """Every comparison of a document and the Bonferroni threshold over them."""

    tests: list[ChanceTest]

    @property
    def size(self) -> int:
        """M, the number of comparisons."""
        return len(self.tests)

    @property
    def threshold(self) -> float:
        """The per-comparison level ALPHA / M."""
        return ALPHA / max(1, self.size)

    def significant(self, r: RunResult | None = None) -> list[ChanceTest]:
        """Tests above chance after the correction (of ``r`` only, if given), lowest FPR level, highest TPR first."""
        found = [t for t in self.tests if t.p_value <= self.threshold and (r is None or t.result is r)]
        return sorted(found, key=lambda t: (t.level, -float(t.entry.tpr or 0.0)))

    def is_significant(self, r: RunResult, attack: str, level: float) -> bool:
        """Whether model ``r``'s ``attack`` beats chance at ``level`` after the correction."""
        return any(t.attack == attack and math.isclose(t.level, level) for t in self.significant(r))

    def correction_text(self) -> str:
        """The table's significance note: ``"Bonferroni over 48 comparisons (every membership attack at ...)"``."""
        return (f"Bonferroni over {self.size} comparison{'s' if self.size != 1 else ''} (every membership attack at "
                f"every measurable FPR level of every model; exact test against no membership signal, family-wise "
                f"{100 * (1 - ALPHA):.0f}%)")


def chance_family(results: Results) -> ChanceFamily:
    """The family of every measurable (model, membership attack, FPR level) of ``results`` (successful models)."""
    tests = [t for r in results.results if r.ok for n, a in membership_attacks(r).items() for t in _tests(r, n, a)]
    return ChanceFamily(tests)
