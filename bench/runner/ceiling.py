"""The non-private ceiling: the validation split every model trained with privacy off is measured on.

And the choice of the best such model per dataset (``bench.results.Ceiling``). The choice reads validation accuracies
only: the test set never reaches it (``choose_ceiling`` takes no test number into account;
tests/bench/runner/test_ceiling.py).
"""

from __future__ import annotations

from collections import defaultdict

import torch

from bench.core.data import ArrayDataset, MembershipSplit
from bench.results import Candidate, Ceiling, RunResult

VALIDATION_MAX = 5_000  # images, as docs/recipes.md's validation split


def validation_split(split: MembershipSplit) -> tuple[ArrayDataset, str]:
    """``(images, description)``: the first ``VALIDATION_MAX`` of the attacker's population, else of the non-members.

    Training images no target trains on (docs/recipes.md's validation split), never the test set; ValueError if none.
    """
    source, name = (split.population, "attacker's population") if len(split.population) \
        else (split.non_members, "non-members")
    n = min(VALIDATION_MAX, len(source))
    if n < 1:
        raise ValueError("no training images outside the members to validate on")
    return source.subset(torch.arange(n)), f"the first {n:,} images of the {name} (training images no target trains on)"


def is_candidate(r: RunResult) -> bool:
    """Whether ``r`` is a ceiling candidate: a finished privacy-off model with a validation accuracy."""
    return (r.ok and r.privacy is not None and r.privacy.off and r.preset is None and r.utility is not None
            and r.utility.validation_accuracy is not None)


def choose_ceiling(results: list[RunResult], *, n_test: int, validation: str, n_validation: int) -> Ceiling | None:
    """The non-private ceiling of one dataset's ``results``.

    Among the recipes trained with privacy off (``is_candidate``), grouped by mechanism and averaged over seeds, the one
    with the highest validation accuracy (ties: the first in run order). Test accuracies are carried along for the
    report and never compared.

    Args:
        results: one dataset's RunResults.
        n_test: test images per model.
        validation: the validation split in words.
        n_validation: its size (``validation_split``).

    Returns:
        The ``Ceiling``, or None when no model was trained with privacy off.
    """
    groups: dict[str, list[RunResult]] = defaultdict(list)
    for r in results:
        if is_candidate(r):
            groups[r.mechanism].append(r)
    candidates = []
    for mech, rs in groups.items():
        val = [float(r.utility.validation_accuracy) for r in rs]  # type: ignore[union-attr, arg-type]
        test = [float(r.utility.test_accuracy) for r in rs]  # type: ignore[union-attr]
        candidates.append(Candidate(mechanism=mech, off_point=rs[0].off_point, model=rs[0].model,
                                    validation_accuracy=sum(val) / len(val), test_accuracy=sum(test) / len(test),
                                    seeds=[r.seed for r in rs]))
    if not candidates:
        return None
    best = max(candidates, key=lambda c: c.validation_accuracy)  # max keeps the first of equals
    return Ceiling(mechanism=best.mechanism, off_point=best.off_point, model=best.model,
                   validation_accuracy=best.validation_accuracy, test_accuracy=best.test_accuracy, n_test=n_test,
                   validation=validation, n_validation=n_validation, candidates=candidates)
