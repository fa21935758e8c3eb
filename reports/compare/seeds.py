"""Changes judged against seed-to-seed variation.

Where BASE or NEW holds several seeds of a cell (dataset, mechanism, target ε), its test accuracy and each attack's AUC
over seeds are tested with ``stats.seed_test``; the models of one seed then differ as models (McNemar's test on one
model's outcomes), and ``--fail-on accuracy`` / ``auc`` judge the configuration by the test over seeds. Two trainings of
one configuration with different seeds (or libraries that draw differently) differ by more than the test set's sampling:
only a test over seeds bounds the false-regression rate of such comparisons (docs/guides/compare.md).
"""

from __future__ import annotations

from collections import defaultdict

from bench.results import Results, RunResult
from reports.compare.model import Change
from reports.compare.stats import seed_test

Group = tuple[str, str, float | None, bool, str | None]


def _groups(doc: Results) -> dict[Group, list[RunResult]]:
    found: dict[Group, list[RunResult]] = defaultdict(list)
    for r in doc.results:
        if r.ok and r.utility is not None:
            found[(r.dataset, r.mechanism, r.target_epsilon, r.off_point, r.row)].append(r)
    return found


def _label(key: Group, before: list[RunResult], after: list[RunResult]) -> str:
    dataset, mechanism, target, off, row = key
    eps = "∞ (privacy off)" if off else "—" if target is None else f"{target:g}"
    seeds = f"seeds {','.join(str(r.seed) for r in before)} → {','.join(str(r.seed) for r in after)}"
    return f"{dataset} {mechanism} target ε {eps}{f' row {row}' if row else ''}, {seeds}"


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def seed_changes(run: str, base: Results, new: Results) -> tuple[list[Change], set[Group]]:
    """The changes over seeds of every cell with several seeds on one side at least.

    Args:
        run: the NEW run's label.
        base: BASE.
        new: the NEW run.

    Returns:
        ``(changes, groups)``: test accuracy and each attack's AUC over seeds, and the cells they cover.
    """
    gb, gn = _groups(base), _groups(new)
    changes, covered = [], set()
    for key in [k for k in gb if k in gn]:
        before, after = gb[key], gn[key]
        label = _label(key, before, after)
        acc_b = [r.utility.test_accuracy for r in before if r.utility is not None]
        acc_n = [r.utility.test_accuracy for r in after if r.utility is not None]
        tested = seed_test(acc_b, acc_n)
        if tested is None:
            continue
        covered.add(key)
        mb, mn = _mean(acc_b), _mean(acc_n)
        changes.append(Change(run, label, "test accuracy (mean over seeds)", "accuracy", f"{100 * mb:.1f}%",
                              f"{100 * mn:.1f}%", delta=100 * (mn - mb), test=tested[1], p=tested[0],
                              worse=mn < mb if mn != mb else None))
        for name in sorted(set.intersection(*(set(r.attacks) for r in before + after))):
            auc_b = [r.attacks[name].metrics.auc for r in before]
            auc_n = [r.attacks[name].metrics.auc for r in after]
            result = seed_test(auc_b, auc_n)
            if result is not None:
                ab, an = _mean(auc_b), _mean(auc_n)
                changes.append(Change(run, label, f"AUC ({name}, mean over seeds)", "auc", f"{ab:.3f}", f"{an:.3f}",
                                      delta=an - ab, test=result[1], p=result[0],
                                      worse=an > ab if an != ab else None))
    return changes, covered


def demote(changes: list[Change], covered: set[Group], key_of: dict[int, Group]) -> None:
    """The per-model accuracy, AUC and degenerate changes of cells judged over seeds become kind ``model-accuracy``.

    ``model-auc``, ``model-degenerate``: shown and tested, but no ``--fail-on`` verdict on one model.
    """
    for c in changes:
        if key_of.get(id(c)) in covered and c.kind in ("accuracy", "auc", "degenerate"):
            c.kind = f"model-{c.kind}"
            c.metric = f"{c.metric} (this seed's model)"
