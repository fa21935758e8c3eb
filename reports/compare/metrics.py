"""Every metric of one matched cell, before and after.

Each difference with the test appropriate to it (``reports.compare.stats``): test accuracy (paired where both runs kept
per-example outcomes), each attack's AUC and TPR at each FPR, the accountant's ε, the tightest valid audit bound,
conformance, privacy bugs, the degenerate flag and failures. Throughput is ``reports.compare.throughput``.
"""

from __future__ import annotations

from bench.results import AttackRecord, Results, RunResult, unpack_outcomes
from reports.bounds import bugs_for, tightest_valid
from reports.common import format_privacy, format_tpr, level_label
from reports.compare.model import CellComparison, Change, finite
from reports.compare.stats import auc_z_test, fisher_exact, mcnemar_exact
from reports.sections.audit.conformance import conformance_cell

EPSILON_TOLERANCE = 1e-6  # relative: an accountant's ε recomputed for the same parameters agrees to far better
EPSILON_GROWTH = 1e-3  # relative: an ε calibrated to the same target moves by ~1e-5 when the recipe changes


def cell_changes(run: str, base_doc: Results, new_doc: Results, cell: CellComparison) -> list[Change]:
    """Every metric's change of one matched cell (those without a difference included, with p = 1)."""
    label, b, n = cell.key.label(), cell.base, cell.new
    if not b.ok or not n.ok:
        if b.ok == n.ok:
            return []
        return [Change(run, label, "training", "failed", _status(b), _status(n), worse=not n.ok, exact=True)]
    found = [_accuracy(run, label, base_doc, new_doc, b, n), *_epsilon(run, label, b, n)]
    for name in sorted(set(b.attacks) & set(n.attacks)):
        found += _attack(run, label, name, b.attacks[name], n.attacks[name])
    found += _audit(run, label, b, n) + _conformance(run, label, base_doc, new_doc, b, n)
    if (b.degenerate is None) != (n.degenerate is None):  # as significant as the accuracy change that made it
        acc = found[0]
        found.append(Change(run, label, "degenerate (learned nothing)", "degenerate", _degenerate(b),
                            _degenerate(n), worse=n.degenerate is not None, p=None if acc is None else acc.p,
                            test="" if acc is None else f"its test accuracy's: {acc.test}"))
    return [c for c in found if c is not None]


def _status(r: RunResult) -> str:
    return "ok" if r.ok else f"failed ({r.error or 'no reason'})"


def _degenerate(r: RunResult) -> str:
    return "no" if r.degenerate is None else f"yes ({r.degenerate.reason})"


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _accuracy(run: str, label: str, base_doc: Results, new_doc: Results, b: RunResult, n: RunResult
              ) -> Change | None:
    """McNemar's exact test where both models kept per-example outcomes of the same test set.

    Else Fisher's exact test on the accuracies over each run's test-set size.
    """
    if b.utility is None or n.utility is None:
        return None
    acc_b, acc_n = b.utility.test_accuracy, n.utility.test_accuracy
    change = Change(run, label, "test accuracy", "accuracy", _pct(acc_b), _pct(acc_n), delta=100 * (acc_n - acc_b),
                    worse=acc_n < acc_b if acc_n != acc_b else None)
    ob, on = b.utility.test_outcomes, n.utility.test_outcomes
    if ob is not None and on is not None and ob.test_hash == on.test_hash and ob.n == on.n:
        try:
            change.p, lost, won = mcnemar_exact(unpack_outcomes(ob), unpack_outcomes(on))
            change.test = f"McNemar exact, {lost} lost / {won} won of {ob.n}"
            return change
        except ValueError:  # a corrupt bitset: the unpaired test below
            pass
    size_b, size_n = _n_test(base_doc, b), _n_test(new_doc, n)
    if size_b and size_n:
        change.p = fisher_exact(round(acc_b * size_b), size_b, round(acc_n * size_n), size_n)
        change.test = "Fisher exact, unpaired"
    return change


def _n_test(doc: Results, r: RunResult) -> int | None:
    info = doc.datasets.get(r.dataset)
    return info.n_test if info is not None and info.n_test > 0 else None


def _epsilon(run: str, label: str, b: RunResult, n: RunResult) -> list[Change]:
    """The accountant's ε with its δ, accountant and relation, and the same guarantee under other relations.

    Any change is reported (exact, no sampling); worse when the accountant's ε (same relation, δ and accountant: the one
    the target is matched on) grows by more than ``EPSILON_GROWTH`` (relative) or the guarantee is lost, better when it
    falls by more, None (neither) when only the accountant, δ, relation or another relation's ε changed, or ε moved
    within a calibration's tolerance.
    """
    pb, pn = b.privacy, n.privacy
    before, after = format_privacy(pb), format_privacy(pn)
    if pb is None or pn is None or before == after:
        return []
    same_terms = (pb.delta, pb.accountant, pb.relation, pb.guarantee) == (pn.delta, pn.accountant, pn.relation,
                                                                          pn.guarantee)
    pairs = [(pb.epsilon, pn.epsilon)] if same_terms else []
    others = {(o.relation, o.accountant): o.epsilon for o in pn.other_relations}
    pairs += [(o.epsilon, others[(o.relation, o.accountant)]) for o in pb.other_relations
              if same_terms and (o.relation, o.accountant) in others]
    pairs = [(x, y) for x, y in pairs if finite(x) and finite(y)]
    moved = [(x, y) for x, y in pairs if abs(y - x) > EPSILON_TOLERANCE * max(abs(x), 1.0)]  # type: ignore
    if same_terms and pairs and not moved and len(pb.other_relations) == len(pn.other_relations):
        return []  # the same ε, printed differently (rounding)
    worse: bool | None = None
    if pairs:  # the ε the target is matched on decides; another relation's ε only moves with it (shown)
        x, y = pairs[0]
        worse = True if y > x * (1 + EPSILON_GROWTH) else False if y < x * (1 - EPSILON_GROWTH) else None
    elif pb.has_guarantee and not pn.has_guarantee:
        worse = True
    delta = pairs[0][1] - pairs[0][0] if same_terms and pairs else None  # type: ignore[operator]
    return [Change(run, label, "ε (accountant)", "epsilon", before, after, delta=delta, worse=worse, exact=True)]


def _attack(run: str, label: str, name: str, ab: AttackRecord, an: AttackRecord) -> list[Change]:
    """The attack's AUC (z-test, Hanley-McNeil) and its TPR at each FPR measurable in both (Fisher exact)."""
    mb, mn = ab.metrics, an.metrics
    found = []
    if finite(mb.auc) and finite(mn.auc):
        p = auc_z_test(mb.auc, ab.n_members, ab.n_non_members, mn.auc, an.n_members, an.n_non_members)
        found.append(Change(run, label, f"AUC ({name})", "auc", f"{mb.auc:.3f}", f"{mn.auc:.3f}",
                            delta=mn.auc - mb.auc, test="z-test, Hanley-McNeil", p=p,
                            worse=mn.auc > mb.auc if mn.auc != mb.auc else None))
    for key in sorted(set(mb.tpr_at_fpr) & set(mn.tpr_at_fpr), key=float, reverse=True):
        tb, tn = mb.tpr_at_fpr[key], mn.tpr_at_fpr[key]
        if not (tb.measurable and tn.measurable and finite(tb.tpr) and finite(tn.tpr)):
            continue
        kb, kn = round(tb.tpr * ab.n_members), round(tn.tpr * an.n_members)  # type: ignore[operator]
        found.append(Change(run, label, f"TPR @ {level_label(float(key))} FPR ({name})", "tpr", format_tpr(tb),
                            format_tpr(tn), delta=100 * (tn.tpr - tb.tpr), test="Fisher exact",  # type: ignore
                            p=fisher_exact(kb, ab.n_members, kn, an.n_members),
                            worse=tn.tpr > tb.tpr if tn.tpr != tb.tpr else None))  # type: ignore[operator]
    return found


def _audit(run: str, label: str, b: RunResult, n: RunResult) -> list[Change]:
    """The tightest valid audit bound.

    Shown when it moved; no test (each bound holds at its own confidence), never a regression by itself (a privacy bug
    is ``privacy-bug``).
    """
    vb, vn = tightest_valid(b), tightest_valid(n)
    before = "no valid bound" if vb is None else f"ε ≥ {vb.value:.3g} ({vb.attack})"
    after = "no valid bound" if vn is None else f"ε ≥ {vn.value:.3g} ({vn.attack})"
    if before == after:
        return []
    return [Change(run, label, "tightest valid audit bound", "audit", before, after,
                   delta=None if vb is None or vn is None else vn.value - vb.value)]


def _conformance(run: str, label: str, base_doc: Results, new_doc: Results, b: RunResult, n: RunResult
                 ) -> list[Change]:
    """Conformance (its cell text) and the cell's privacy bugs: a new privacy bug is an exact regression."""
    found = []
    cb, cn = conformance_cell(base_doc, b)[0], conformance_cell(new_doc, n)[0]
    if cb != cn:
        found.append(Change(run, label, "conformance", "conformance", cb, cn, worse=cn.startswith("FAILED") or None))
    bugs_b, bugs_n = bugs_for(base_doc, b), bugs_for(new_doc, n)
    if len(bugs_n) > len(bugs_b):
        found.append(Change(run, label, "privacy bugs (valid audit or conformance refutes ε)", "privacy-bug",
                            str(len(bugs_b)), f"{len(bugs_n)}: {bugs_n[0].method} ({bugs_n[0].attack})",
                            worse=True, exact=True))
    return found
