"""Cell texts and lookups shared by every report module.

How an ε, a TPR or a failure is written, and which attack is the strongest on one model. Reads the typed
``bench.results`` objects only; imports no other module of ``reports`` (every other module builds on this one).

Every ε is printed with its δ, its accountant and, where the model has one, its neighbouring relation; a
mechanism without a formal guarantee prints "no guarantee"; a model trained with privacy off (the baseline, a
mechanism's ε = ∞ point) prints "ε = ∞ (privacy off)".
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from bench.results import AttackRecord, MeasuredEpsilon, Metrics, PrivacyRecord, Results, RunResult, TprAtFpr

MAIN_LEVEL = 0.001  # the headline low-FPR level: TPR at 0.1 % FPR
DASH = "—"
OFF_TEXT = "ε = ∞ (privacy off)"  # a model trained with privacy off: never "no guarantee"
GUARANTEE_WORDS = {
    "central-dp": "central (ε, δ)-DP of the trained model",
    "local-dp": "local (ε, δ)-DP: every record is noised before any training",
    "dp-release": "(ε, δ)-DP of the released data set",
    "none": "no formal guarantee",
}
GUARANTEE_SHORT = {"central-dp": "central DP", "local-dp": "local DP", "dp-release": "DP of the release",
                   "none": "none"}  # fmt: skip
RELATION_WORDS = {"add-remove": "add/remove", "replace-one": "replace-one",
                  "replace-one-same-class": "replace-one, same class"}  # fmt: skip


def num(x: float, fmt: str = ".3g") -> str:
    """``x`` formatted with ``fmt``; ``"∞"`` for an infinite value."""
    return "∞" if math.isinf(x) else format(x, fmt)


def delta_text(delta: float) -> str:
    """δ with two significant digits, in exponent form below 0.01: ``1e-05``, ``1.7e-05``, ``0.05``."""
    text = format(delta, ".2g")
    return f"{delta:.1e}".replace(".0e", "e") if "e" not in text and 0 < delta < 0.01 else text


def relation_text(relation: str | None) -> str:
    """The neighbouring relation as printed: ``"add-remove" -> "add/remove"``; ``""`` when there is none."""
    return "" if not relation else RELATION_WORDS.get(relation, relation)


def one_line(text: object, default: str = "unknown error") -> str:
    """``text`` on one line (runs of whitespace folded), or ``default`` when empty."""
    return " ".join(str(text or "").split()) or default


def has_guarantee(privacy: PrivacyRecord | None) -> bool:
    """Whether a model's privacy record carries a formal guarantee with an ε."""
    return privacy is not None and privacy.has_guarantee


def measured_epsilon(r: RunResult) -> MeasuredEpsilon | None:
    """The ε a model's audit run implies from its measured parameters (``AttackRecord.conformance``).

    Under the model's own relation where one was recomputed for it, else the first (by attack name); None without any.
    """
    found = [a.conformance.measured_epsilon for _, a in sorted(r.attacks.items())
             if a.conformance is not None and a.conformance.measured_epsilon is not None]
    p = r.privacy
    same = [m for m in found if p is not None and m.relation == p.relation]
    return (same or found or [None])[0]


def measured_text(m: MeasuredEpsilon | None) -> str:
    """``"ε certified 1 · from measured parameters ≥ 0.98 (replace-one, dp_accounting-pld, 95%)"``; empty for None.

    The "≥" is a lower confidence limit: noise at its upper limit, rates at their lower limits.
    """
    if m is None:
        return ""
    return (f"ε certified {num(m.certified)} · from measured parameters ≥ {num(m.epsilon)} "
            f"({relation_text(m.relation) or m.relation}, {m.accountant}, {m.confidence:.0%})")


def format_privacy(privacy: PrivacyRecord | None) -> str:
    """One cell of text for a model's ``privacy`` record.

    Args:
        privacy: the RunResult's ``PrivacyRecord``, or ``None`` for a failed cell.

    Returns:
        ``"ε = 0.99 (δ = 1e-05, opacus-prv, add/remove)"`` (the relation only where the record names one; the same
        guarantee under other relations after it, ``"; add/remove: ε = 0.5 (opacus-prv)"``, and any heuristic ε,
        labelled as not a bound, after those), with
        ``" — weak δ ≥ 1/n"`` appended when ``weak_delta``; ``"ε = ∞ (privacy off)"`` for a model trained with
        privacy off; ``"no guarantee"`` (``"no guarantee (claimed ε = 10,
        not a guarantee)"`` when a source claimed an ε); ``"—"`` when there is no record. An ε whose δ or
        accountant is missing is never printed.
    """
    if privacy is None:
        return DASH
    if privacy.off:
        return OFF_TEXT
    eps, delta, accountant = privacy.epsilon, privacy.delta, privacy.accountant
    if eps is None or privacy.guarantee == "none":
        if privacy.claimed_epsilon is None:
            return "no guarantee"
        return f"no guarantee (claimed ε = {num(privacy.claimed_epsilon)}, not a guarantee)"
    if delta is None or not accountant or accountant == "none":
        return "invalid privacy record (ε without δ or accountant)"
    relation = relation_text(privacy.relation)
    text = f"ε = {num(eps)} (δ = {delta_text(delta)}, {accountant}{', ' + relation if relation else ''})"
    for o in privacy.other_relations:  # e.g. DP-SGD's add/remove ε, the figure papers quote
        text += f"; {relation_text(o.relation)}: ε = {num(o.epsilon)} ({o.accountant})"
    groups: dict[tuple[str, float], list[str]] = {}  # DP-SGD's last-iterate heuristic: beside the guarantee, never one
    for h in privacy.heuristics:
        groups.setdefault((h.label, h.delta), []).append(f"{relation_text(h.relation)} ε ≈ {num(h.epsilon)}")
    for (label, h_delta), parts in groups.items():
        text += f"; {label}: {', '.join(parts)} (δ = {delta_text(h_delta)})"
    return text + " — weak δ ≥ 1/n" if privacy.weak_delta else text


def format_tpr(entry: TprAtFpr | None) -> str:
    """One cell of text for a ``tpr_at_fpr`` entry: ``"1.2% [0.8, 1.9]"`` (the CI in percent too).

    Returns:
        The TPR in percent with its Clopper-Pearson interval, ``"not measurable"``, or ``"—"`` without an entry.
    """
    if entry is None:
        return DASH
    if not entry.measurable or entry.tpr is None or entry.lower is None or entry.upper is None:
        return "not measurable"
    tpr, lower, upper = 100 * entry.tpr, 100 * entry.lower, 100 * entry.upper
    digits = 1 if upper >= 1 else 2  # one precision for the three numbers, enough to show small TPRs
    return f"{tpr:.{digits}f}% [{lower:.{digits}f}, {upper:.{digits}f}]"


def level_label(level: float) -> str:
    """``0.001 -> "0.1%"``."""
    return f"{100 * float(level):g}%"


def tpr_entry(metrics: Metrics, level: float) -> TprAtFpr | None:
    """The ``tpr_at_fpr`` entry for ``level`` (keys are matched as floats, not as strings)."""
    for key, entry in metrics.tpr_at_fpr.items():
        if math.isclose(float(key), level, rel_tol=1e-9):
            return entry
    return None


def measurable_tpr(entry: TprAtFpr | None) -> bool:
    """Whether ``entry`` holds a TPR with its interval."""
    return entry is not None and entry.measurable and None not in (entry.tpr, entry.lower, entry.upper)


def is_audit(record: AttackRecord) -> bool:
    """Whether an attack is an audit (one-run or multi-run canaries), not a membership attack on natural members."""
    return record.audit.design.kind in ("one-run", "multi-run")


def membership_attacks(result: RunResult) -> dict[str, AttackRecord]:
    """The membership attacks on a model's natural members (every attack that is not an audit), by name."""
    return {n: a for n, a in sorted(result.attacks.items()) if not is_audit(a)}


def strongest_attack(result: RunResult) -> tuple[str, AttackRecord] | None:
    """``(name, attack)`` of the membership attack with the highest AUC on one RunResult (audits excluded), or None."""
    scored = list(membership_attacks(result).items())
    return max(scored, key=lambda na: na[1].metrics.auc) if scored else None


def strongest_at_level(result: RunResult, level: float = MAIN_LEVEL) -> tuple[str, TprAtFpr] | None:
    """``(name, entry)``: the membership attack of highest measurable TPR at ``level`` (then CP lower), or None."""
    found = [(n, tpr_entry(a.metrics, level)) for n, a in membership_attacks(result).items()]
    found = [(n, e) for n, e in found if e is not None and measurable_tpr(e)]
    return max(found, key=lambda ne: (ne[1].tpr, ne[1].lower)) if found else None


def is_failed(result: RunResult) -> bool:
    """Whether a RunResult is a failed cell."""
    return not result.ok


def degenerate_reason(r: RunResult) -> str:
    """Why a model is degenerate, in a few words.

    "at chance; the noise", "collapsed to one class; the recipe"; "" for a model that learned
    (``bench.results.Degenerate``).
    """
    d = r.degenerate
    if d is None:
        return ""
    reason = {"constant": "collapsed to one class", "at-chance": "at chance"}.get(d.reason, d.reason)
    return reason + {"noise": "; the noise", "recipe": "; the recipe"}.get(d.cause or "", "")


def degenerate_mark(r: RunResult) -> str:
    """A degenerate model's cell mark, e.g. "degenerate (at chance; the noise)"; "" for one that learned something."""
    return f"degenerate ({degenerate_reason(r)})" if r.degenerate is not None else ""


def degenerate_line(r: RunResult) -> str:
    """The one line a run prints for a degenerate model.

    "degenerate model: baseline seed 0: at chance: …; its attack results are not evidence of privacy"; "" for a model
    that learned.
    """
    if r.degenerate is None:
        return ""
    target = "" if target_of(r) is None else f" target ε {target_text(target_of(r))}"
    return (f"degenerate model: {model_label(r)}{target} seed {r.seed}: {r.degenerate.text}; its attack results are "
            "not evidence of privacy")


def finished(results: Results) -> list[RunResult]:
    """The runs of ``results`` that did not fail (``is_failed``), in document order: what the plots draw."""
    return [r for r in results.results if not is_failed(r)]


def model_label(r: RunResult) -> str:
    """The mechanism, with its preset row where a reproduction ran several of one (``"dpsgd (scatternet-eps3)"``)."""
    return r.mechanism if not r.row or r.row == r.mechanism else f"{r.mechanism} ({r.row})"


def target_text(target: float | None) -> str:
    """A target ε as printed in a cell: ``"1"``, ``"0.5"``, ``"∞"`` (an ε = ∞ point), or ``"—"`` without a target."""
    return DASH if target is None else num(target, "g")


def target_of(r: RunResult) -> float | None:
    """A model's target ε: ``math.inf`` at its ε = ∞ point (``off_point`` in results.json), else ``target_epsilon``."""
    return math.inf if r.off_point else r.target_epsilon


def fpr_levels(runs: Iterable[RunResult]) -> list[float]:
    """Every FPR level found in any attack's ``tpr_at_fpr`` of ``runs``, largest first."""
    levels = {float(k) for r in runs for a in r.attacks.values() for k in a.metrics.tpr_at_fpr}
    return sorted(levels, reverse=True)


def failed_attack_names(r: RunResult) -> str:
    """``"attack failed: lira"`` / ``"attacks failed: lira, rmia"`` for a model with ``attack_errors``; ``""``."""
    names = sorted(r.attack_errors)
    if not names:
        return ""
    return f"attack{'s' if len(names) > 1 else ''} failed: {', '.join(names)}"


def with_failed_attacks(text: str, r: RunResult) -> str:
    """A cell's ``text`` with the model's failed attacks named after it (the cell alone when there is none)."""
    failed = failed_attack_names(r)
    if not failed:
        return text
    return failed if text == DASH else f"{text}; {failed}"
