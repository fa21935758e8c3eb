"""The audits in words, for the verdict's headline and per-mechanism notes.

Valid bounds only (``reports.bounds``), each named with its threat model, design, method and confidence; a maximum over
several bounds points to the run-level check (Bonferroni over the run), which alone decides a privacy bug; a heuristic
bound is never cited as evidence.
"""

from __future__ import annotations

import math

from bench.results import PrivacyBug, Results, RunResult
from reports.bounds import (
    BUG_MARK,
    AuditBound,
    bug_audit,
    bug_value,
    bugs_for,
    family,
    family_text,
    percent,
    ratio_text,
    refuted_for,
    tightest,
    valid_bounds,
    value_text,
)
from reports.common import has_guarantee, membership_attacks

NO_AUDIT = ("no audit (canaries in one run, or independent runs) ran: the membership attacks' ε lower bounds are "
            "heuristic (they assume independent outcomes) and are evidence neither of leakage nor of a bug")


def at_target(target: float | None) -> str:
    """``" at target ε 4"``, ``" at ε = ∞ (privacy off)"`` for an ε = ∞ point, or ``""`` without a target."""
    if target is not None and math.isinf(target):
        return " at ε = ∞ (privacy off)"
    return "" if target is None else f" at target ε {target:g}"


def _where(b: AuditBound) -> str:
    return f" on {b.result.mechanism}{at_target(b.result.target_epsilon)}"


def _held_to(b: AuditBound) -> str:
    """What a bound is compared with, in words."""
    if b.reference is None:
        mismatch = b.mismatch()
        return ", with no guarantee to hold it to" if mismatch == "no ε to compare with" \
            else f"; not compared: {mismatch}"
    return f", {ratio_text(b).split(' (')[0]} × {b.reference_text()}"


def _refuted_text(b: PrivacyBug) -> str:
    return (f"{b.mechanism}'s claimed ε {b.epsilon:g}{at_target(b.target_epsilon)} ({bug_audit(b)}: "
            f"{bug_value(b)} at {percent(b.confidence)})")


def bound_sentence(results: Results, runs: list[RunResult]) -> str:
    """One mechanism's audits in one clause (``runs``: its successful models)."""
    if any(bugs_for(results, r) for r in runs):
        return f"a valid audit exceeds the accountant's ε significantly: {BUG_MARK} (see Privacy bugs)"
    refuted = [b for r in runs for b in refuted_for(results, r)]
    if refuted:
        return (f"the audits refute {len(refuted)} claimed ε value(s) ({family_text(results)}), so the source's "
                f"claims are false: " + "; ".join(_refuted_text(b) for b in refuted))
    valid = [b for r in runs for b in valid_bounds(r)]
    if not valid:
        return NO_AUDIT if any(membership_attacks(r) for r in runs) else ""
    best = tightest(valid)
    assert best is not None
    if best.value <= 0:
        return (f"every valid audit bound is 0 ({len(valid)} valid bounds): the audits detect no leakage (a lower "
                "bound of 0 certifies nothing either way)")
    text = f"the largest valid audit bound is ε_LB {best.text()}{at_target(best.result.target_epsilon)}{_held_to(best)}"
    m, conf = family(results)
    audits = {(id(b.result), b.attack) for b in valid}
    if len(audits) > 1 and m:
        text += (f"; a maximum over {len(audits)} audits, so only the run-level check decides: each comparison at "
                 f"{percent(conf)} ({family_text(results)}) finds none above its ε")
    return text


def _tightest_line(results: Results, runs: list[RunResult]) -> str:
    guaranteed = [b for r in runs for b in valid_bounds(r) if b.ratio is not None and has_guarantee(b.privacy)]
    m, conf = family(results)
    if not guaranteed:
        return "Audits: no valid bound is compared with an accountant's ε in this run."
    best = max(guaranteed, key=lambda b: b.ratio or 0.0)
    text = (f"Audits (valid bounds only): the tightest against its accountant's ε is ε_LB {best.text()}{_where(best)}"
            f"{_held_to(best)}")
    if m:
        again = best.at_confidence(conf)
        if again is not None:
            text += f"; at the run-level {percent(conf)} ({family_text(results)}) it is {value_text(again)}"
    return text + "."


def audit_headline(results: Results, runs: list[RunResult]) -> list[str]:
    """The headline's audit sentences for one dataset's successful models.

    The tightest valid bound against its accountant's ε, the privacy bugs and the refuted claims.
    """
    if not any(valid_bounds(r) for r in runs):
        return [NO_AUDIT[0].upper() + NO_AUDIT[1:] + "."] if any(membership_attacks(r) for r in runs) else []
    lines = [_tightest_line(results, runs)]
    bugs = [r for r in runs if bugs_for(results, r)]
    if bugs:
        lines.append(f"{BUG_MARK}: {len(bugs)} model(s) where a valid audit exceeds the accountant's ε "
                     f"({family_text(results)}; red lines above).")
    refuted = [b for r in runs for b in refuted_for(results, r)]
    if refuted:
        lines.append("Refuted by the audits (no guarantee, so not privacy bugs): "
                     + "; ".join(_refuted_text(b) for b in refuted) + ".")
    return lines
