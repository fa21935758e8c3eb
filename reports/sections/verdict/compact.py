"""The compact table of the first screen.

One row per mechanism × target ε, numbers only — the accountant's ε, test accuracy with its 95 % Clopper-Pearson
interval, the cost of privacy, the strongest membership attack's TPR at 0.1 % FPR with its interval, the tightest valid
audit ε_LB against the ε it is held to, conformance, and throughput.

Design notes: docs/design-notes.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from attacks.analysis.statistics.confidence import clopper_pearson
from bench.results import PrivacyRecord, Results, RunResult
from reports.bounds import REFUTED_MARK, audit_bounds_of, bugs_for, ratio_text, refuted_for, tightest_valid, value_text
from reports.ceiling import cost_of_privacy
from reports.common import (
    DASH,
    delta_text,
    format_tpr,
    has_guarantee,
    is_failed,
    level_label,
    membership_attacks,
    num,
    one_line,
    relation_text,
    strongest_at_level,
    strongest_attack,
    with_failed_attacks,
)
from reports.sections.audit.conformance import CONFORMANCE_METHODS, conformance_cell
from reports.sections.verdict.table import LeakageAxis, pairs_by_dataset, row_css, verdict_tables

KEY_MARKS = "ᵃᵇᶜᵈᵉᶠᵍʰⁱʲᵏˡᵐⁿᵒᵖʳˢᵗᵘᵛʷˣʸᶻ"
NBSP = "\u00a0"  # keeps "0.42 / 1.00" on one line
EPSILON_COLUMN, AUDIT_COLUMN = 2, 6


@dataclass
class CompactTable:
    """One dataset's compact table.

    ``headers`` and ``rows`` (text cells), a ``title`` per cell (its whole provenance), a CSS class per row
    (``reports.sections.verdict.table.row_css``), the ``keys`` legend (one line per key: ``"ᵃ δ = 1e-05,
    dp_accounting-pld, replace-one"``) and the leakage axis of the TPR column.
    """

    dataset: str
    axis: LeakageAxis
    headers: list[str] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)
    titles: list[list[str]] = field(default_factory=list)
    row_css: list[str] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)


def provenance(p: PrivacyRecord) -> str:
    """What an ε is stated with, e.g. ``"δ = 1e-05, dp_accounting-pld, replace-one"`` (+ ``" (weak δ ≥ 1/n)"``)."""
    weak = " (weak δ ≥ 1/n)" if p.weak_delta else ""
    relation = relation_text(p.relation)
    return f"δ = {delta_text(p.delta or 0.0)}{weak}, {p.accountant}" + (f", {relation}" if relation else "")


def epsilon_text(x: float) -> str:
    """An ε in a compact cell: three significant digits, whole from 1,000 up (``"0.481"``, ``"2.99"``, ``"2000"``)."""
    return num(x) if abs(x) < 1000 else f"{x:.0f}"


def accuracy_text(results: Results, r: RunResult) -> str:
    """Test accuracy in percent with its 95 % interval, as text.

    ``"97.1 [96.8, 97.4]"``: test accuracy in percent with its 95 % Clopper-Pearson interval over the dataset's
    test images (the accuracy alone where their number is not recorded); ``"—"`` without one.
    """
    if r.utility is None:
        return DASH
    acc = r.utility.test_accuracy
    info = results.datasets.get(r.dataset)
    if info is None or info.n_test < 1:
        return f"{100 * acc:.1f}"
    lower, upper = clopper_pearson(round(acc * info.n_test), info.n_test)
    return f"{100 * acc:.1f} [{100 * lower:.1f}, {100 * upper:.1f}]"


def _epsilon(r: RunResult) -> tuple[str, str | None]:
    """The accountant's ε cell (its provenance apart, None where there is none to state)."""
    p = r.privacy
    if p is None:
        return DASH, None
    if p.off:
        return "∞ (off)", None
    if not has_guarantee(p) or p.epsilon is None:
        return "no guarantee" + ("" if p.claimed_epsilon is None else f" (claimed {num(p.claimed_epsilon)})"), None
    return epsilon_text(p.epsilon), provenance(p)


def _audit(results: Results, r: RunResult) -> tuple[str, str | None, str]:
    """The tightest valid audit bound of any audit of ``r`` against the ε it is held to.

    Cell, that ε's provenance (None where it has none), title (the bound's audit, threat model, design, method and
    confidence, and the ratio).
    """
    b = tightest_valid(r)
    if b is None:
        return ("no valid bound" if audit_bounds_of(r) else "no audit"), None, ""
    title = b.text() + (f"; ratio to {b.reference_text()}: {ratio_text(b)}" if b.reference else f"; {ratio_text(b)}")
    value, c = value_text(b.value), b.compared
    value = value.replace(" ", NBSP)  # "≥ 100 (cap)" on one line
    if b.reference is None or c is None:
        text, combo = f"{value} (not compared)", None
    elif not has_guarantee(c):
        text, combo = f"{value}{NBSP}/ claimed{NBSP}{epsilon_text(b.reference)}", None
    else:
        text, combo = f"{value}{NBSP}/{NBSP}{epsilon_text(b.reference)}", provenance(c)
    if any(bug.method not in CONFORMANCE_METHODS for bug in bugs_for(results, r)):
        text += " PRIVACY BUG"
    elif refuted_for(results, r):
        text += f" {REFUTED_MARK}"
    return text, combo, title


def _tpr(r: RunResult, axis: LeakageAxis) -> str:
    """The strongest membership attack at the axis' FPR (TPR with its interval), or its AUC where the axis is."""
    if not membership_attacks(r):
        return with_failed_attacks(DASH, r)
    if axis.level is None:
        best = strongest_attack(r)
        return with_failed_attacks(DASH if best is None else f"AUC {best[1].metrics.auc:.3f}", r)
    found = strongest_at_level(r, axis.level)
    return with_failed_attacks(format_tpr(found[1]).replace("%", "") if found else "not measurable", r)


def _cost(results: Results, r: RunResult) -> str:
    if r.off_point:
        return "reference"
    cost = cost_of_privacy(results, r)
    return DASH if cost is None else f"{round(cost, 1) + 0.0:.1f}"  # + 0.0: no "-0.0"


def _row(results: Results, r: RunResult, verdict: list[str], axis: LeakageAxis
         ) -> tuple[list[str], list[str], list[str | None]]:
    """One model's cells, their titles and the provenance of its ε columns (``EPSILON_COLUMN``, ``AUDIT_COLUMN``)."""
    mech = verdict[0].split(" — ")[0]  # "dpsgd (seed 1)", its degenerate mark apart
    if is_failed(r):
        cells = [mech, verdict[1], f"failed: {one_line(r.error)}"] + [DASH] * 6
        return cells, [""] * 2 + [one_line(r.error)] + [""] * 6, [None, None]
    eps, eps_combo = _epsilon(r)
    audit, audit_combo, audit_title = _audit(results, r)
    conformance, conformance_title = conformance_cell(results, r)
    sps = r.timings.samples_per_s
    cells = [mech + (" (degenerate)" if r.degenerate else ""), verdict[1], eps, accuracy_text(results, r),
             _cost(results, r), _tpr(r, axis), audit, conformance, DASH if sps is None else f"{sps:,.0f}"]
    titles = [f"{verdict[0]}; guarantee: {verdict[2]}", "", verdict[3],
              verdict[5], verdict[6], verdict[7], audit_title or verdict[4], conformance_title,
              "training samples per second, wall clock" + (" (cached model: its original training)"
                                                           if r.timings.cached else "")]
    return cells, titles, [eps_combo, audit_combo]


def _headers(axis: LeakageAxis) -> list[str]:
    leak = "strongest attack's AUC" if axis.level is None else f"TPR @ {level_label(axis.level)} FPR, % [95% CI]"
    return ["mechanism", "target ε", "ε", "test acc., % [95% CI]", "cost of privacy (pts)", leak, "audit ε_LB / ε",
            "conformance (tests)", "samples/s"]


def _key(keys: dict[str, str], combo: str) -> str:
    if combo not in keys:
        keys[combo] = KEY_MARKS[len(keys) % len(KEY_MARKS)]
    return keys[combo]


def _keyed(table: CompactTable, combos: list[list[str | None]]) -> None:
    """State each ε column's provenance once in its header where every row shares it, else key each row's ε."""
    keys: dict[str, str] = {}
    for k, column in enumerate((EPSILON_COLUMN, AUDIT_COLUMN)):
        found = {c[k] for c in combos if c[k] is not None}
        if len(found) == 1:
            table.headers[column] += f" ({found.pop()})"
            continue
        for row, c in zip(table.rows, combos, strict=True):
            if c[k] is not None:
                mark = _key(keys, c[k])
                row[column] = row[column] + mark if column == EPSILON_COLUMN else _mark_reference(row[column], mark)
    table.keys = [f"{mark} {combo}" for combo, mark in keys.items()]


def _mark_reference(cell: str, mark: str) -> str:
    """The audit cell with ``mark`` after the ε it is held to (``"0.42 / 1.00ᵃ"``, a verdict mark kept after it)."""
    for verdict in (" PRIVACY BUG", f" {REFUTED_MARK}"):
        if cell.endswith(verdict):
            return cell[: -len(verdict)] + mark + verdict
    return cell + mark


def compact_tables(results: Results) -> list[CompactTable]:
    """One ``CompactTable`` per dataset, rows in document order (the verdict table's, ``verdict_tables``)."""
    groups = pairs_by_dataset(results)
    tables = []
    for v, pairs in zip(verdict_tables(results), groups.values(), strict=True):
        table = CompactTable(v["dataset"], v["axis"], _headers(v["axis"]))
        combos = []
        for (r, _), vrow in zip(pairs, v["rows"], strict=True):
            cells, titles, combo = _row(results, r, vrow["cells"], v["axis"])
            table.rows.append(cells)
            table.titles.append(titles)
            table.row_css.append(row_css(vrow))
            combos.append(combo)
        _keyed(table, combos)
        tables.append(table)
    return tables

