"""The run's answer in one sentence and its status badges, the first things the report shows.

Which mechanism with a formal guarantee is the most accurate at each target ε compared, whether the run-level check
found a privacy bug, which models are degenerate; then one count each of privacy bugs, refuted claims, degenerate
models, failed cells and failed attacks, each linking to where it is shown. Target ε values here are targets (the ε each
model certifies, with its δ, accountant and relation, is in the compact table).
"""

from __future__ import annotations

from collections import defaultdict

from bench.results import Results
from reports.bounds import family_text
from reports.common import has_guarantee, is_failed, model_label, target_of, target_text
from reports.figures import slug
from reports.section import Badge
from reports.sections.verdict.table import Pair, pairs_by_dataset


def _best(ok: list[Pair]) -> str:
    """Which guaranteed mechanism is the most accurate at each target ε where several compete (mean over seeds)."""
    acc: dict[float, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r, row in ok:
        if has_guarantee(r.privacy) and r.target_epsilon is not None and r.utility is not None and not r.off_point:
            acc[r.target_epsilon][str(row["mechanism"])].append(r.utility.test_accuracy)
    competing = {t: ms for t, ms in acc.items() if len(ms) > 1} or acc
    if not competing:
        return "no mechanism in this run has a formal guarantee to compare"
    best = {t: max((sum(v) / len(v), m) for m, v in ms.items()) for t, ms in sorted(competing.items())}
    winners = dict.fromkeys(m for _, m in best.values())
    span = [100 * a for a, _ in best.values()]
    accuracy = f"{min(span):.1f}%" if len(span) == 1 else f"{min(span):.1f}–{max(span):.1f}%"
    if len(winners) == 1:
        targets = ", ".join(f"{t:g}" for t in best)
        return (f"with a formal guarantee, {next(iter(winners))} is the most accurate mechanism at every target ε "
                f"compared ({targets}; {accuracy} test accuracy)")
    by_winner = {w: [f"{t:g}" for t, (_, m) in best.items() if m == w] for w in winners}
    return "with a formal guarantee, the most accurate is " + " and ".join(
        f"{w} at target ε {', '.join(ts)}" for w, ts in by_winner.items()) + f" ({accuracy} test accuracy)"


def _bugs(results: Results, dataset: str) -> str:
    bugs = [b for b in results.privacy_bugs if b.dataset == dataset]
    if bugs:
        return f"{len(bugs)} PRIVACY BUG{'S' if len(bugs) > 1 else ''} found ({family_text(results)})"
    if results.audit is None:
        return "the privacy-bug check has not run (the run did not complete)"
    return f"no privacy bug was found ({family_text(results)})"


def _degenerate(ok: list[Pair]) -> str:
    found: dict[str, list[str]] = defaultdict(list)
    for r, _ in ok:
        if r.degenerate is not None:
            found[model_label(r)].append(target_text(target_of(r)))
    if not found:
        return "no model is degenerate"
    names = [f"{m} (target ε {', '.join(ts)})" if any(t != "—" for t in ts) else m for m, ts in found.items()]
    listed = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
    count = sum(len(ts) for ts in found.values())
    return f"{listed} {'is' if count == 1 else 'are'} degenerate (learned nothing)"


def answer(results: Results) -> str:
    """The run's answer in one sentence per dataset (prefixed "On <dataset>," where there are several).

    e.g. "dpsgd is the most accurate mechanism with a formal guarantee at every target ε compared (1, 3, 8; 89.6–97.0%
    test accuracy); no privacy bug was found (Bonferroni over 159 comparisons); local-gaussian (target ε 1) is
    degenerate (learned nothing)."; "No model finished yet." without any.
    """
    groups = pairs_by_dataset(results)
    several = len(groups) > 1
    sentences = []
    for dataset, pairs in groups.items():
        ok = [(r, row) for r, row in pairs if not is_failed(r)]
        if not ok:
            sentences.append(f"On {dataset}, every model failed." if several else "Every model failed.")
            continue
        text = f"{_best(ok)}; {_bugs(results, dataset)}; {_degenerate(ok)}."
        sentences.append(f"On {dataset}, {text}" if several else text[0].upper() + text[1:])
    return " ".join(sentences) or "No model finished yet."


def _plural(n: int, one: str, many: str) -> str:
    return one if n == 1 else many


def badges(results: Results) -> list[Badge]:
    """Privacy bugs, refuted claims, degenerate models, failed cells and failed attacks, counted.

    Each linking to the section that shows them (a count of 0 links to where it would be).
    """
    bugs, refuted = len(results.privacy_bugs), len(results.refuted_claims)
    ok = [r for r in results.results if not is_failed(r)]
    degenerate = [r for r in ok if r.degenerate is not None]
    failed = len(results.results) - len(ok)
    attacks = sum(len(r.attack_errors) for r in ok)
    reading = f"reading-{slug(degenerate[0].dataset)}" if degenerate else "verdict"
    checked = results.audit is not None  # the run-level check runs once the run completed
    bug = (Badge(_plural(bugs, "privacy bug", "privacy bugs"), bugs, "privacy-bugs" if bugs else "audit",
                 "bad" if bugs else "good") if checked or bugs
           else Badge("privacy bugs (not checked: the run did not complete)", None, "audit", "warn"))
    return [
        bug,
        Badge(_plural(refuted, "refuted claim", "refuted claims"), refuted, "audit", "warn" if refuted else "good"),
        Badge(_plural(len(degenerate), "degenerate model", "degenerate models"), len(degenerate), reading,
              "warn" if degenerate else "good"),
        Badge(_plural(failed, "failed cell", "failed cells"), failed, "failed-cells" if failed else "setup",
              "bad" if failed else "good"),
        Badge(_plural(attacks, "failed attack", "failed attacks"), attacks, "failed-attacks" if attacks else "attacks",
              "bad" if attacks else "good"),
    ]
