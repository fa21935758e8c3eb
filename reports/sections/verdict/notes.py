"""The verdict in words: per dataset, the headline a reader needs first and one note per mechanism.

Computed from the numbers of the verdict tables (``reports.sections.verdict.table``). Every ε printed with "=" comes
with its δ, accountant and relation elsewhere; here ε appears only as "target ε" or "claimed ε" values and as ratios. A
membership attack "beats chance" only after a Bonferroni correction over every comparison of the document
(``reports.significance``); the audits' sentences cite valid bounds only (``reports.sections.audit.notes``).
"""

from __future__ import annotations

import math
from collections import defaultdict

from bench.results import Results
from reports.ceiling import ceiling_line, cost_of_privacy, off_point_accuracy, recipes_line
from reports.common import (
    GUARANTEE_SHORT,
    GUARANTEE_WORDS,
    MAIN_LEVEL,
    degenerate_reason,
    format_tpr,
    is_failed,
    level_label,
    membership_attacks,
    relation_text,
    strongest_at_level,
    strongest_attack,
    target_of,
)
from reports.sections.audit.notes import at_target as _at
from reports.sections.audit.notes import audit_headline, bound_sentence
from reports.sections.verdict.table import Pair, Row, pairs_by_dataset
from reports.significance import ChanceFamily, chance_family


def _guaranteed_accuracy(row: Row) -> bool:
    return row["epsilon"] is not None and row["target_epsilon"] is not None and row["test_accuracy"] is not None


def _ship_note(rows: list[Row]) -> list[str]:
    """Per target ε and neighbouring relation, the guaranteed mechanisms calibrated to that ε under that relation.

    Ranked by test accuracy (mean over seeds), and the baseline. Mechanisms calibrated under different relations are
    never ranked together (the same ε means different protection).
    """
    acc: dict[tuple[float, str, str], list[float]] = defaultdict(list)
    kinds: dict[str, str] = {}
    baseline = [row["test_accuracy"] for row in rows if row["guarantee"] == "none" and row["target_epsilon"] is None
                and row["mechanism"] == "baseline"]
    for row in rows:
        if _guaranteed_accuracy(row):
            acc[(row["target_epsilon"], row["relation"] or "", row["mechanism"])].append(row["test_accuracy"])
            kinds[row["mechanism"]] = GUARANTEE_SHORT.get(row["guarantee"], row["guarantee"])
    notes = []
    for target, relation in sorted({(t, rel) for t, rel, _ in acc}):
        ranked = sorted(((sum(v) / len(v), m) for (t, rel, m), v in acc.items() if (t, rel) == (target, relation)),
                        reverse=True)
        listing = ", ".join(f"{m} {100 * a:.1f}% ({kinds[m]})" for a, m in ranked)
        under = f" under {relation_text(relation)}" if relation else ""
        notes.append(f"At target ε {target:g}{under}, by test accuracy: {listing}.")
    if baseline and notes:
        notes.append(f"Without privacy the baseline's own recipe reaches {100 * sum(baseline) / len(baseline):.1f}% "
                     "(each mechanism's ε = ∞ point, its recipe with privacy off, is in the table). The "
                     "guarantees differ in kind: central DP protects the training set from whoever sees the model, "
                     "DP of the release from whoever sees the released data, local DP each record even from the "
                     "trainer.")  # fmt: skip
    return notes


def _attack_sentence(pairs: list[Pair], chance: ChanceFamily) -> str:
    """What the membership attacks on one mechanism's models achieve against chance, after the correction."""
    found = [t for r, _ in pairs for t in chance.significant(r)]
    if found:
        best = min(found, key=lambda t: (t.level, -float(t.entry.tpr or 0.0)))
        return (f"{best.attack} beats chance{_at(target_of(best.result))}: {best.detail()}, significant after "
                f"{chance.correction_text()}")
    best_at = [(found, row) for r, row in pairs if (found := strongest_at_level(r))]
    if best_at:
        (name, e), row = max(best_at, key=lambda fr: (fr[0][1].tpr, fr[0][1].lower or 0.0))
        return (f"no membership attack beats chance after {chance.correction_text()}; the best at "
                f"{level_label(MAIN_LEVEL)} FPR, {name}{_at(row['target_epsilon'])}, reaches TPR {format_tpr(e)}")
    by_auc = [(b, row) for r, row in pairs if (b := strongest_attack(r))]
    if not by_auc:
        return "no membership attack ran"
    n = max(a.n_non_members for r, _ in pairs for a in membership_attacks(r).values())
    (name, a), row = max(by_auc, key=lambda br: br[0][1].metrics.auc)
    return (f"TPR at 0.1% FPR is not measurable with {n} non-members (needs {math.ceil(10 / MAIN_LEVEL):,}); "
            f"the strongest membership attack by AUC is {name} (AUC {a.metrics.auc:.3f}{_at(row['target_epsilon'])}; "
            "an AUC is not tested against chance here)")


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
    accs = [(row["test_accuracy"], row["target_epsilon"]) for r, row in ok
            if row["test_accuracy"] is not None and not r.off_point]  # the ε = ∞ point: in the cost of privacy
    if len(accs) == 1:
        return f"test accuracy {100 * accs[0][0]:.1f}%"
    if accs:
        return f"test accuracy {100 * accs[0][0]:.1f}%{_at(accs[0][1])} to {100 * accs[-1][0]:.1f}%{_at(accs[-1][1])}"
    return "no test accuracy"


def _cost_words(results: Results, ok: list[Pair]) -> str:
    """The cost-of-privacy note of a mechanism.

    "cost of privacy 9.1 / 2.0 / 0.4 points at target ε 1 / 3 / 8 against its ε = ∞ point (97.7%)" (mean over
    seeds at each target ε); "" without an ε = ∞ point.
    """
    costs: dict[float, list[float]] = defaultdict(list)
    offs = []
    for r, _ in ok:
        cost, off = cost_of_privacy(results, r), off_point_accuracy(results, r)
        if cost is not None and off is not None and r.target_epsilon is not None:
            costs[r.target_epsilon].append(cost)
            offs.append(off)
        elif r.off_point and r.utility is not None:
            offs.append(r.utility.test_accuracy)
    if not costs:
        return ""
    eps = sorted(costs)
    values = " / ".join(f"{round(sum(costs[e]) / len(costs[e]), 1) + 0.0:.1f}" for e in eps)  # + 0.0: no "-0.0"
    return (f"cost of privacy {values} points of test accuracy at target ε {' / '.join(f'{e:g}' for e in eps)} "
            f"against its ε = ∞ point ({100 * sum(offs) / len(offs):.1f}%, its recipe with privacy off)")


def _mechanism_note(results: Results, mech: str, pairs: list[Pair], chance: ChanceFamily) -> str:
    ok = sorted(((r, row) for r, row in pairs if not is_failed(r)),
                key=lambda rr: (rr[1]["target_epsilon"] is not None, rr[1]["target_epsilon"] or 0.0))
    learned = [(r, row) for r, row in ok if r.degenerate is None]
    parts = [_accuracy_words(ok), _cost_words(results, ok),
             _attack_sentence(learned, chance) if learned else "every model is degenerate: its attacks are no evidence",
             bound_sentence(results, [r for r, _ in ok])]
    degenerate = [f"{_at(target_of(r)).strip() or 'without a target ε'} ({degenerate_reason(r)})"
                  for r, _ in ok if r.degenerate]
    if degenerate:
        parts.insert(2, f"degenerate (learned nothing) {', '.join(degenerate)}")
    failed = len(pairs) - len(ok)
    if failed:
        parts.append(f"{failed} model(s) failed")
    broken = sorted({name for r, _ in ok for name in r.attack_errors})
    if broken:
        models = sum(bool(r.attack_errors) for r, _ in ok)
        parts.append(f"attack(s) {', '.join(broken)} failed on {models} model(s) (see Failed attacks)")
    return f"{mech}: {_guarantee_words(ok)}; " + "; ".join(p for p in parts if p) + "."


def verdict_notes(results: Results) -> dict[str, list[str]]:
    """Plain-language notes per dataset, computed from the numbers.

    The guaranteed mechanisms ranked by accuracy at each target ε, then one sentence per mechanism (guarantee, accuracy
    range, whether a membership attack beats chance after the Bonferroni correction, how the valid audit bounds compare
    with the accountant's or the claimed ε, and which attacks failed).
    """
    notes, chance = {}, chance_family(results)
    for dataset, pairs in pairs_by_dataset(results).items():
        lines = _ship_note([row for r, row in pairs if not is_failed(r)])
        by_mech: dict[str, list[Pair]] = defaultdict(list)
        for r, row in pairs:
            by_mech[str(row["mechanism"])].append((r, row))
        for mech, mine in by_mech.items():
            if any(not is_failed(r) for r, _ in mine):
                lines.append(_mechanism_note(results, mech, mine, chance))
            else:
                lines.append(f"{mech}: every model failed (see Failed cells).")
        notes[dataset] = lines
    return notes


def _best_line(ok: list[Pair], ceiling: bool = False) -> str:
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
    baseline = [row["test_accuracy"] for _, row in ok if row["mechanism"] == "baseline"
                and row["target_epsilon"] is None and row["test_accuracy"] is not None]  # fmt: skip
    if ceiling or not baseline:  # the ceiling's own sentence follows (reports.ceiling)
        return line
    return line + f" The non-private baseline reaches {100 * max(baseline):.1f}%."


def _leak_line(ok: list[Pair], chance: ChanceFamily) -> str:
    beating = [f"{row['mechanism']}{_at(row['target_epsilon'])} ({found[0].text()})"
               for r, row in ok if (found := chance.significant(r))]  # fmt: skip
    if beating:
        return (f"Membership attacks beat chance on: {'; '.join(beating)}; significant after "
                f"{chance.correction_text()}.")
    learned = [r for r, _ in ok if r.degenerate is None]
    if ok and not learned:
        return ("No model of this run learned anything (every one is degenerate), so its attack results are no "
                "evidence of privacy.")
    skipped = len(ok) - len(learned)
    but = f" ({skipped} degenerate model(s) left out: no evidence either way)" if skipped else ""
    if chance.size:
        return (f"No membership attack beats chance on any model{' that learned' if skipped else ''}{but} after "
                f"{chance.correction_text()}.")
    return "TPR at ≤ 1% FPR is not measurable in this run (too few non-members); see the AUCs below."


def _degenerate_lines(ok: list[Pair]) -> list[str]:
    """The headline's word on degenerate models (``bench.results.Degenerate``).

    The baseline's first, then the others, each with its cause.
    """
    lines = []
    base = [r for r, _ in ok if r.mechanism == "baseline" and r.target_epsilon is None and r.degenerate]
    if base:
        lines.append(f"The baseline is degenerate: {base[0].degenerate.text if base[0].degenerate else ''}. It "
                     "learned nothing: no comparison with it, and none of its attack results, says anything about "
                     "privacy.")
    others = [f"{row['mechanism']}{_at(row['target_epsilon'])} seed {r.seed} ({degenerate_reason(r)})"
              for r, row in ok if r.degenerate is not None and r not in base]
    if others:
        lines.append(f"Degenerate models (they learned nothing; their attack results are shown but are not evidence "
                     f"of privacy): {'; '.join(others)}.")
    return lines


def verdict_headline(results: Results) -> dict[str, list[str]]:
    """Per dataset, the sentences a reader needs first.

    Which mechanism with a formal guarantee is the most accurate at the target ε values tried (against the non-private
    baseline), whether any membership attack beats chance after a Bonferroni correction over every comparison, the
    tightest valid audit bound against its accountant's ε, the privacy bugs and refuted claims of the run-level check,
    and how many attacks failed. A degenerate baseline (it learned nothing) leads the headline; other degenerate models
    are named after it, and "no attack beats chance" is said of the models that learned only.
    """
    out, chance = {}, chance_family(results)
    for dataset, pairs in pairs_by_dataset(results).items():
        ok = [(r, row) for r, row in pairs if not is_failed(r)]
        extra = [line for line in (ceiling_line(results, dataset), recipes_line(results, dataset)) if line]
        lines = [*_degenerate_lines(ok), _best_line(ok, dataset in results.ceilings), *extra, _leak_line(ok, chance),
                 *audit_headline(results, [r for r, _ in ok])]
        broken = sum(len(r.attack_errors) for r, _ in ok)
        if broken:
            lines.append(f"{broken} attack(s) failed on finished models (see Failed attacks); their rows show the "
                         "attacks that did run.")
        out[dataset] = lines
    return out


def leak_reading(results: Results) -> str:
    """The Membership attacks section's one-line reading.

    Per dataset whether any membership attack beats chance after the Bonferroni correction over every comparison of the
    document (the headline's sentence).
    """
    chance, groups = chance_family(results), pairs_by_dataset(results)
    lines = [_leak_line([(r, row) for r, row in pairs if not is_failed(r)], chance) for pairs in groups.values()]
    if len(lines) == 1:
        return lines[0]
    return " ".join(f"{dataset}: {line}" for dataset, line in zip(groups, lines, strict=True))
