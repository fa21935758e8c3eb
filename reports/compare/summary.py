"""The texts every compare view shows (terminal, Markdown, HTML).

The verdict "what changed", the table of significant changes and, per NEW run, one row per matched cell with each metric
as ``before → after``.
"""

from __future__ import annotations

from bench.results import Results, RunResult
from reports.bounds import tightest_valid
from reports.ceiling import cost_of_privacy
from reports.common import DASH, MAIN_LEVEL, format_privacy, format_tpr, level_label, strongest_attack, tpr_entry
from reports.compare.model import ALPHA, CellComparison, Change, Comparison, RunComparison
from reports.sections.audit.conformance import conformance_cell

CHANGE_HEADERS = ["run", "cell", "metric", "before", "after", "Δ", "p (test, Holm)"]
CELL_HEADERS = ["cell", "settings changed", "ε (δ, accountant, relation)", "test acc.", "cost of privacy (pts)",
                "strongest AUC", f"TPR @ {level_label(MAIN_LEVEL)} FPR", "audit ε_LB (valid)", "conformance",
                "degenerate", "samples/s (NEW / BASE)"]


def verdict(comparison: Comparison, failing: list[Change] | None = None) -> str:
    """The answer in one sentence: no significant change, or how many changes and regressions, the first named.

    Args:
        comparison: the comparison.
        failing: the regressions ``--fail-on`` rules fail on (None: no rules were given).
    """
    found = comparison.significant()
    cells = sum(len(run.cells) for run in comparison.runs)
    where = (f"{cells} matched cell(s), {comparison.tests} tests, Holm's correction at family-wise "
             f"α = {ALPHA:g}")
    if not found:
        return f"No significant change: nothing differs beyond chance or exactly ({where})."
    worse = [c for c in found if c.worse is True]
    head = f"{len(found)} significant change(s), {len(worse)} of them regression(s)"
    first = worse[0] if worse else found[0]
    gate = "" if failing is None else f"; {len(failing)} fail the --fail-on rules"
    return f"{head}{gate} ({where}). First: {first.cell}: {first.metric} {first.before} → {first.after}."


def change_row(c: Change) -> list[str]:
    """One row of the changes table (``CHANGE_HEADERS``)."""
    if c.delta is None:
        delta = DASH
    elif c.kind == "throughput":
        delta = f"×{c.delta:.2f}"
    elif c.kind in ("accuracy", "tpr"):
        delta = f"{c.delta:+.2f} pts"
    else:
        delta = f"{c.delta:+.3g}"
    return [c.run, c.cell, c.metric, c.before, c.after, delta, c.p_text]


def direction(c: Change) -> str:
    """``worse``, ``better`` or ``changed``: the CSS class and the word of a change."""
    return "worse" if c.worse is True else "better" if c.worse is False else "changed"


def _pair(before: str, after: str) -> str:
    return f"same: {before}" if before == after else f"{before} → {after}"


def _accuracy(r: RunResult) -> str:
    return DASH if r.utility is None else f"{100 * r.utility.test_accuracy:.1f}%"


def _cost(doc: Results, r: RunResult) -> str:
    if r.off_point:
        return "reference"
    cost = cost_of_privacy(doc, r)
    return DASH if cost is None else f"{round(cost, 1) + 0.0:.1f}"


def _auc(r: RunResult) -> str:
    best = strongest_attack(r)
    return DASH if best is None else f"{best[1].metrics.auc:.3f} ({best[0]})"


def _tpr(r: RunResult) -> str:
    found = [(n, tpr_entry(a.metrics, MAIN_LEVEL)) for n, a in sorted(r.attacks.items())]
    measured = [(n, e) for n, e in found if e is not None and e.measurable and e.tpr is not None]
    if not measured:
        return "not measurable" if found else DASH
    name, entry = max(measured, key=lambda ne: ne[1].tpr or 0.0)
    return f"{format_tpr(entry)} ({name})"


def _audit(r: RunResult) -> str:
    b = tightest_valid(r)
    return "no valid bound" if b is None else f"ε ≥ {b.value:.3g}"


def _significant_mark(cell: CellComparison) -> str:
    marks = [c for c in cell.changes if c.significant]
    return "" if not marks else " ▲" if any(c.worse is True for c in marks) else " ●"


def cell_row(base_doc: Results, run: RunComparison, cell: CellComparison) -> list[str]:
    """One matched cell as ``CELL_HEADERS``.

    Each metric ``"same: x"`` or ``"x → y"``; a failed model's cells name the failure. ``▲``: a significant regression
    in the cell, ``●``: a significant change.
    """
    b, n = cell.base, cell.new
    label = cell.key.label() + _significant_mark(cell)
    settings = "; ".join(cell.settings) or "none"
    if not b.ok or not n.ok:
        status = _pair("ok" if b.ok else f"failed: {b.error}", "ok" if n.ok else f"failed: {n.error}")
        return [label, settings, status] + [DASH] * (len(CELL_HEADERS) - 3)
    doc = run.doc
    return [label, settings, _pair(format_privacy(b.privacy), format_privacy(n.privacy)),
            _pair(_accuracy(b), _accuracy(n)), _pair(_cost(base_doc, b), _cost(doc, n)), _pair(_auc(b), _auc(n)),
            _pair(_tpr(b), _tpr(n)), _pair(_audit(b), _audit(n)),
            _pair(conformance_cell(base_doc, b)[0], conformance_cell(doc, n)[0]),
            _pair("yes" if b.degenerate else "no", "yes" if n.degenerate else "no"), cell.throughput_text]


def unmatched_lines(run: RunComparison) -> list[str]:
    """One line per cell found in one run only (not compared)."""
    return ([f"only in BASE (not compared): {k.label()}" for k in run.only_base]
            + [f"only in {run.label} (not compared): {k.label()}" for k in run.only_new])
