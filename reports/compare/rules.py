"""``--fail-on`` rules: which significant changes are regressions that fail a CI job (exit status 4).

A rule is ``NAME`` or ``NAME:THRESHOLD``, comma-separated: ``accuracy:-1pt`` (a significant drop of test accuracy by at
least 1 point), ``tpr`` / ``tpr:+0.5pt`` (a significant rise of any attack's TPR at a fixed FPR), ``auc:+0.02`` (of
any attack's AUC), ``epsilon`` (the accountant's ε grew by more than 0.1 %, or the guarantee was lost),
``privacy-bug`` (a new privacy bug: a valid audit or conformance test refutes ε), ``degenerate`` (a model now learns
nothing), ``failed`` (a cell now fails), ``throughput:0.9x`` (normalised samples/s below 0.9 × BASE's; no test: one
measurement per run).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from bench.core.errors import BenchError
from reports.compare.model import Change

RULES = ("accuracy", "tpr", "auc", "epsilon", "privacy-bug", "degenerate", "failed", "throughput")
_UNITS = {"accuracy": "pt", "tpr": "pt", "auc": "", "throughput": "x"}
_NUMBER = re.compile(r"^([+-]?\d+(?:\.\d+)?)(pt|x)?$")


@dataclass(frozen=True)
class Rule:
    """One ``--fail-on`` rule: the kind of change it fails on and its threshold.

    Points, an AUC difference or a throughput ratio; None: any significant regression.
    """

    kind: str
    threshold: float | None = None

    def fails(self, change: Change) -> bool:
        """Whether ``change`` is a regression this rule fails on."""
        if change.kind != self.kind:
            return False
        if self.kind == "throughput":
            limit = 1.0 if self.threshold is None else self.threshold
            return change.delta is not None and change.delta < limit
        if change.worse is not True or not change.significant:
            return False
        if self.threshold is None or change.delta is None:
            return True
        return abs(change.delta) >= abs(self.threshold)


def parse_rules(text: str | None) -> list[Rule]:
    """The ``--fail-on`` rules of a comma list (None or empty: none), in order.

    Raises:
        BenchError: an unknown rule or a threshold that is not a number with the rule's unit (one line naming it and
            what is allowed).
    """
    rules = []
    for item in (text or "").split(","):
        name, _, value = item.strip().partition(":")
        if not name and not value:
            continue
        if name not in RULES:
            raise BenchError(f"--fail-on rule {item.strip()!r} is not one of {', '.join(RULES)} "
                             "(e.g. accuracy:-1pt,tpr,epsilon,privacy-bug,throughput:0.9x)")
        rules.append(Rule(name, _threshold(name, value) if value else None))
    return rules


def _threshold(name: str, value: str) -> float:
    unit = _UNITS.get(name)
    found = _NUMBER.match(value.strip())
    if unit is None or found is None or (found.group(2) or "") != unit:
        allowed = "no threshold" if unit is None else f"a number{' followed by ' + unit if unit else ''}"
        raise BenchError(f"--fail-on {name}:{value}: {name} takes {allowed} (e.g. accuracy:-1pt, tpr:+0.5pt, "
                         "auc:+0.02, throughput:0.9x)")
    number = float(found.group(1))
    if name == "throughput" and not 0 < number <= 1:
        raise BenchError(f"--fail-on throughput:{value}: the ratio must be in (0, 1] (e.g. throughput:0.9x)")
    return number


def regressions(changes: list[Change], rules: list[Rule]) -> list[Change]:
    """The changes any rule fails on, each once, in the order given."""
    return [c for c in changes if any(rule.fails(c) for rule in rules)]
