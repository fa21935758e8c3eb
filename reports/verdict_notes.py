"""The verdict in words: per dataset, the headline a reader needs first and one note per mechanism, computed from
the numbers of the verdict tables (``reports.verdict``). Every ε printed with "=" comes with its δ, accountant and
relation elsewhere; here ε appears only as "target ε" or "claimed ε" values."""

from __future__ import annotations

import math
from collections import defaultdict

from bench.results import Results, RunResult, TprAtFpr
from reports.common import (
    GUARANTEE_SHORT,
    GUARANTEE_WORDS,
    MAIN_LEVEL,
    format_tpr,
    is_failed,
    relation_text,
    strongest_at_level,
    strongest_attack,
)
from reports.empirical import BUG_MARK, bugs_for
from reports.verdict import Pair, Row, pairs_by_dataset


def _at(target: float | None) -> str:
    return "" if target is None else f" at target ε {target:g}"


def _guaranteed_accuracy(row: Row) -> bool:
    return row["epsilon"] is not None and row["target_epsilon"] is not None and row["test_accuracy"] is not None


def _ship_note(rows: list[Row]) -> list[str]:
    """Per target ε, the guaranteed mechanisms ranked by test accuracy (mean over seeds), and the baseline."""
    acc: dict[tuple[float, str], list[float]] = defaultdict(list)
    kinds: dict[str, str] = {}
    baseline = [row["test_accuracy"] for row in rows if row["guarantee"] == "none" and row["target_epsilon"] is None]
    for row in rows:
        if _guaranteed_accuracy(row):
            acc[(row["target_epsilon"], row["mechanism"])].append(row["test_accuracy"])
            kinds[row["mechanism"]] = GUARANTEE_SHORT.get(row["guarantee"], row["guarantee"])
    notes = []
    for target in sorted({t for t, _ in acc}):
        ranked = sorted(((sum(v) / len(v), m) for (t, m), v in acc.items() if t == target), reverse=True)
        listing = ", ".join(f"{m} {100 * a:.1f}% ({kinds[m]})" for a, m in ranked)
        notes.append(f"At target ε {target:g}, by test accuracy: {listing}.")
    if baseline and notes:
        notes.append(f"Without privacy the baseline reaches {100 * sum(baseline) / len(baseline):.1f}%. The "
                     "guarantees differ in kind: central DP protects the training set from whoever sees the model, "
                     "DP of the release from whoever sees the released data, local DP each record even from the "
                     "trainer.")  # fmt: skip
    return notes


def _beats_chance(found: tuple[str, TprAtFpr]) -> bool:
    """Whether the 95 % interval of a TPR at 0.1 % FPR lies above chance (0.1 %)."""
    return (found[1].lower or 0.0) > MAIN_LEVEL


def _attack_sentence(pairs: list[Pair]) -> str:
    best = [(found, row) for r, row in pairs if (found := strongest_at_level(r))]
    if best:
        (name, e), row = max(best, key=lambda fr: (fr[0][1].tpr, fr[0][1].lower or 0.0))
        where = _at(row["target_epsilon"])
        if _beats_chance((name, e)) and e.tpr is not None:
            return (f"{name} recovers membership at TPR {format_tpr(e)} at 0.1% FPR{where}, "
                    f"{e.tpr / MAIN_LEVEL:.0f}× chance")  # fmt: skip
        return f"no attack beats chance (0.1%) at 0.1% FPR; the best, {name}{where}, reaches TPR {format_tpr(e)}"
    by_auc = [(b, row) for r, row in pairs if (b := strongest_attack(r))]
    if not by_auc:
        return "no membership attack ran"
    n = max(a.n_non_members for r, _ in pairs for a in r.attacks.values())
    (name, a), row = max(by_auc, key=lambda br: br[0][1].metrics.auc)
    return (f"TPR at 0.1% FPR is not measurable with {n} non-members (needs {math.ceil(10 / MAIN_LEVEL):,}); "
            f"the strongest attack by AUC is {name} (AUC {a.metrics.auc:.3f}{_at(row['target_epsilon'])})")


def _claim_refuted(r: RunResult, row: Row) -> bool:
    """Whether a model without a guarantee has an empirical ε lower bound above the ε its source claimed."""
    claimed = r.privacy.claimed_epsilon if r.privacy else None
    return row["epsilon"] is None and row["epsilon_lb"] is not None and claimed is not None \
        and row["epsilon_lb"] > claimed


def _bound_sentence(results: Results, pairs: list[Pair]) -> str:
    bounded = [(r, row) for r, row in pairs if row["epsilon_lb"] is not None]
    if not bounded:
        return ""
    r, row = max(bounded, key=lambda rr: rr[1]["epsilon_lb"])
    lb, who = row["epsilon_lb"], f"{row['epsilon_lb_attack']}{_at(row['target_epsilon'])}"
    claimed = [row2 for r2, row2 in bounded if _claim_refuted(r2, row2)]
    if any(bugs_for(results, r2) for r2, _ in bounded):
        return f"an empirical ε lower bound exceeds the accountant's ε significantly: {BUG_MARK} (see Privacy bugs)"
    if claimed:
        row2 = claimed[0]
        return (f"the empirical ε lower bound {row2['epsilon_lb']:.2f} ({row2['epsilon_lb_attack']}"
                f"{_at(row2['target_epsilon'])}) exceeds the claimed ε: that claim is false")
    if lb <= 0:
        return "no attack certifies any leakage (every empirical ε lower bound is 0)"
    if row["epsilon"] is None:
        return f"the largest empirical ε lower bound is {lb:.2f} ({who}), with no guarantee to hold it to"
    if any(row2["epsilon"] is not None and row2["epsilon_lb"] > row2["epsilon"] for _, row2 in bounded):
        return (f"the largest empirical ε lower bound, {lb:.2f} ({who}), is above an accountant's ε but not "
                "significantly after the Bonferroni correction over the run")
    return f"empirical ε lower bounds reach {lb:.2f} ({who}), below the accountant's ε of every model"


def _guarantee_words(ok: list[Pair]) -> str:
    first = ok[0][1]
    guarantee = GUARANTEE_WORDS.get(str(first["guarantee"]), str(first["guarantee"]))
    if first["accountant"]:
        relation = relation_text(first["relation"])
        guarantee += f" ({first['accountant']} accountant, δ = {first['delta']:.2g}"
        guarantee += f", {relation})" if relation else ")"
    elif any(r.privacy is not None and r.privacy.claimed_epsilon is not None for r, _ in ok):
        guarantee += " (the ε its source claims is not one)"
    return guarantee


def _accuracy_words(ok: list[Pair]) -> str:
    accs = [(row["test_accuracy"], row["target_epsilon"]) for _, row in ok if row["test_accuracy"] is not None]
    if len(accs) == 1:
        return f"test accuracy {100 * accs[0][0]:.1f}%"
    if accs:
        return f"test accuracy {100 * accs[0][0]:.1f}%{_at(accs[0][1])} to {100 * accs[-1][0]:.1f}%{_at(accs[-1][1])}"
    return "no test accuracy"


def _mechanism_note(results: Results, mech: str, pairs: list[Pair]) -> str:
    ok = sorted(((r, row) for r, row in pairs if not is_failed(r)),
                key=lambda rr: (rr[1]["target_epsilon"] is not None, rr[1]["target_epsilon"] or 0.0))
    parts = [_accuracy_words(ok), _attack_sentence(ok), _bound_sentence(results, ok)]
    failed = len(pairs) - len(ok)
    if failed:
        parts.append(f"{failed} model(s) failed")
    broken = sorted({name for r, _ in ok for name in r.attack_errors})
    if broken:
        models = sum(bool(r.attack_errors) for r, _ in ok)
        parts.append(f"attack(s) {', '.join(broken)} failed on {models} model(s) (see Failed attacks)")
    return f"{mech}: {_guarantee_words(ok)}; " + "; ".join(p for p in parts if p) + "."


def verdict_notes(results: Results) -> dict[str, list[str]]:
    """Plain-language notes per dataset, computed from the numbers: the guaranteed mechanisms ranked by
    accuracy at each target ε, then one sentence per mechanism (guarantee, accuracy range, what the strongest
    attack achieves at 0.1 % FPR against chance, how the empirical ε lower bounds compare with the accountant's
    or the claimed ε, and which attacks failed)."""
    notes = {}
    for dataset, pairs in pairs_by_dataset(results).items():
        lines = _ship_note([row for r, row in pairs if not is_failed(r)])
        by_mech: dict[str, list[Pair]] = defaultdict(list)
        for r, row in pairs:
            by_mech[str(row["mechanism"])].append((r, row))
        for mech, mine in by_mech.items():
            if any(not is_failed(r) for r, _ in mine):
                lines.append(_mechanism_note(results, mech, mine))
            else:
                lines.append(f"{mech}: every model failed (see Failed cells).")
        notes[dataset] = lines
    return notes


def _best_line(ok: list[Pair]) -> str:
    """The headline's first sentence: the most accurate mechanism with a formal guarantee at each target ε."""
    best: dict[float, tuple[float, str]] = {}
    competing: dict[float, set[str]] = defaultdict(set)
    for _, row in ok:
        if _guaranteed_accuracy(row):
            t = row["target_epsilon"]
            best[t] = max(best.get(t, (-1.0, "")), (row["test_accuracy"], str(row["mechanism"])))
            competing[t].add(str(row["mechanism"]))
    alone = {t: best[t][1] for t in best if len(competing[t]) == 1}
    if len(alone) < len(best):  # compare where mechanisms compete (reference ε values run for one only)
        best = {t: v for t, v in best.items() if t not in alone}
    else:
        alone = {}
    winners = {m for _, m in best.values()}
    if not best:
        line = "No mechanism in this run has a formal guarantee."
    elif len(winners) == 1:
        accs = [100 * a for a, _ in best.values()]
        span = f"{min(accs):.1f}%" if len(accs) == 1 else f"{min(accs):.1f}–{max(accs):.1f}%"
        targets = ", ".join(f"{t:g}" for t in sorted(best))
        line = (f"With a formal guarantee, {winners.pop()} is the most accurate mechanism at every target ε "
                f"compared ({targets}): {span} test accuracy.")  # fmt: skip
    else:
        line = ("Most accurate with a formal guarantee: "
                + "; ".join(f"{m} at target ε {t:g} ({100 * a:.1f}%)" for t, (a, m) in sorted(best.items())) + ".")
    if alone:
        line += " Run for one mechanism only: " + ", ".join(f"{m} at target ε {t:g}" for t, m in sorted(alone.items()))
        line += "."
    baseline = [row["test_accuracy"] for _, row in ok if row["guarantee"] == "none"
                and row["target_epsilon"] is None and row["test_accuracy"] is not None]  # fmt: skip
    return line + (f" The non-private baseline reaches {100 * max(baseline):.1f}%." if baseline else "")


def _leak_line(ok: list[Pair]) -> str:
    leaks = [(row, found) for r, row in ok if (found := strongest_at_level(r))]
    beating = [f"{row['mechanism']}{_at(row['target_epsilon'])} ({found[0]}, TPR {format_tpr(found[1])})"
               for row, found in leaks if _beats_chance(found)]  # fmt: skip
    if beating:
        return "Membership attacks beat chance at 0.1% FPR on: " + "; ".join(beating) + "."
    if leaks:
        return "No membership attack beats chance at 0.1% FPR on any model (95% intervals)."
    return "TPR at 0.1% FPR is not measurable in this run (too few non-members); see the AUCs below."


def verdict_headline(results: Results) -> dict[str, list[str]]:
    """Per dataset, the two or three sentences a reader needs first: which mechanism with a formal guarantee is
    the most accurate at the target ε values tried (against the non-private baseline), whether any attack beats
    chance at 0.1 % FPR, which claimed ε values the attacks refute or which accountant ε a privacy bug breaks,
    and how many attacks failed.
    """
    out = {}
    for dataset, pairs in pairs_by_dataset(results).items():
        ok = [(r, row) for r, row in pairs if not is_failed(r)]
        lines = [_best_line(ok), _leak_line(ok)]
        refuted = [f"{row['mechanism']}'s claimed ε {r.privacy.claimed_epsilon:g} (lower bound "
                   f"{row['epsilon_lb']:.2f}, {row['epsilon_lb_attack']})"
                   for r, row in ok if _claim_refuted(r, row) and r.privacy is not None
                   and r.privacy.claimed_epsilon is not None]  # fmt: skip
        if refuted:
            lines.append("Refuted by the audits: " + "; ".join(refuted) + ".")
        bugs = sum(bool(bugs_for(results, r)) for r, _ in ok)
        if bugs:
            lines.append(f"{BUG_MARK}: {bugs} model(s) with an empirical ε lower bound significantly above the "
                         "accountant's ε (red lines above).")
        broken = sum(len(r.attack_errors) for r, _ in ok)
        if broken:
            lines.append(f"{broken} attack(s) failed on finished models (see Failed attacks); their rows show the "
                         "attacks that did run.")
        out[dataset] = lines
    return out
