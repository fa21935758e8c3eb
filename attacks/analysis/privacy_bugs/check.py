"""The run-level privacy-bug check: valid evidence that refutes an accountant's guarantee fails the run (exit 3).

Two kinds of test decide, and nothing else: valid bounds (``attacks.analysis``) above the ε the accountant states for
the relation the audit tests, with the test of its whole certified curve; and conformance tests
(``attacks.conformance.hypothesis_tests``). Estimates never decide. M, the number of comparisons, is fixed by the run's
design before any score is seen; each is made at 1 − (1 − ``confidence``)/M (Bonferroni over the run). A valid bound
above a source's claimed ε of a mechanism without a guarantee is a refuted claim, reported beside. Why each rule:
docs/design-notes.md, ``attacks.analysis.privacy_bugs.check``.
"""

from __future__ import annotations

from typing import TypedDict

from attacks.analysis import audit_bounds, family, profile_rejected
from attacks.analysis.statistics.curve import certified_tradeoff, curve_rejected
from bench.results import AttackRecord, PrivacyBug, PrivacyRecord, RunResult

VALID_DESIGNS = ("one-run", "multi-run")
# ε from an approximation, not an upper bound (Opacus' gdp accountant: a central-limit theorem): never audited against
NOT_CERTIFIED = ("opacus-gdp",)
CONFORMANCE = "conformance"  # one comparison per conformance test: method "conformance:<index>"
MEASURED = "measured-epsilon"  # the ε the measured parameters imply, against the certified ε
Comparison = tuple[RunResult, str, AttackRecord, str, PrivacyRecord]


def _comparisons(results: list[RunResult]) -> list[Comparison]:
    items = []
    for r in results:
        if not r.ok:
            continue
        for name, record in sorted(r.attacks.items()):
            design, p = record.audit.design, record.held_to(r.privacy)  # the rule the reports use too
            if p is None or design.kind not in VALID_DESIGNS or p.accountant in NOT_CERTIFIED:
                continue
            guaranteed = p.has_guarantee
            members = family(design)
            items += [(r, name, record, b.method, p) for b in record.audit.bounds if b.method in members]
            one_run = design.kind == "one-run" and record.audit.one_run is not None
            if guaranteed and p.profile and (one_run or design.kind == "multi-run"):
                items.append((r, name, record, "certified-curve", p))
        for name, record in sorted(r.attacks.items()):  # conformance: held to the audited run's own guarantee
            c, p = record.conformance, record.audited_privacy or r.privacy
            if c is None or p is None or not p.has_guarantee or p.accountant in NOT_CERTIFIED:
                continue
            items += [(r, name, record, f"{CONFORMANCE}:{i}", p) for i, t in enumerate(c.tests) if t.deciding]
            if c.measured_epsilon is not None and c.measured_epsilon.p_value is not None:
                items.append((r, name, record, MEASURED, p))
    return items


def _refutes(record: AttackRecord, method: str, p: PrivacyRecord, confidence: float,
             bounds: dict[int, dict[str, float]]) -> tuple[bool, float | None]:
    """Whether ``method`` of ``record``'s audit refutes ``p`` at ``confidence``, and its bound.

    ``bounds`` caches each record's ``audit_bounds`` (every analysis at once) across that record's compared methods.
    """
    audit = record.audit
    if method.startswith(CONFORMANCE + ":") and record.conformance is not None:
        test = record.conformance.tests[int(method.split(":")[1])]
        return test.p_value < 1.0 - confidence, None
    if method == MEASURED and record.conformance is not None and record.conformance.measured_epsilon is not None:
        p_value = record.conformance.measured_epsilon.p_value
        return p_value is not None and p_value < 1.0 - confidence, None
    if method == "certified-curve" and audit.design.kind == "multi-run":
        tradeoff = certified_tradeoff(audit.design.certified_mu, p.profile)
        return tradeoff is not None and curve_rejected(audit.counts, tradeoff, confidence=confidence), None
    if method == "certified-curve" and audit.one_run is not None:
        return profile_rejected(audit.one_run.m, audit.one_run.guesses, p.profile, confidence=confidence), None
    if id(record) not in bounds:
        bounds[id(record)] = audit_bounds(audit, confidence=confidence)
    value = bounds[id(record)].get(method)
    if value is None:  # in the family, not valid (e.g. normality rejected): counted, decides nothing
        return False, None
    epsilon = p.epsilon if p.epsilon is not None else p.claimed_epsilon
    if epsilon is None:  # no ε stated at all: nothing to refute
        return False, value
    return value > epsilon * (1.0 + 1e-9), value


class ConformanceFacts(TypedDict, total=False):
    """A refuted conformance comparison's facts, the ``PrivacyBug`` fields of the same names.

    None: not a conformance comparison.
    """

    test: str
    measured: float | None
    certified: float | None
    p_value: float | None


NOT_CONFORMANCE = ConformanceFacts()


def _conformance_test(record: AttackRecord, method: str) -> ConformanceFacts | None:
    """A refuted conformance comparison's facts for its ``PrivacyBug``.

    (``test``, ``measured``, ``certified``, ``p_value``.) None for every other method.
    """
    c = record.conformance
    if c is None:
        return None
    if method.startswith(CONFORMANCE + ":"):
        t = c.tests[int(method.split(":")[1])]
        return ConformanceFacts(test=t.name, measured=t.measured, certified=t.certified, p_value=t.p_value)
    if method == MEASURED and c.measured_epsilon is not None:
        m = c.measured_epsilon
        return ConformanceFacts(test=f"ε from measured parameters ({m.accountant}, {m.relation})",
                                measured=m.epsilon, certified=m.certified, p_value=m.p_value)
    return None


def _unmade(results: list[RunResult], items: list[Comparison]) -> int:
    """The comparisons a failed cell or a failed audit would have made.

    So that M follows the run's configuration and not which jobs succeeded (a failure never lowers M): a failed cell
    counts as many as the most any complete cell of the same dataset, mechanism and kind (private or ε = ∞) made; a
    failed attack of a finished cell as many as that attack's records (its name, or its name and a suffix: ``canary``,
    ``canary-whitebox``) made there.
    """
    made: dict[tuple[int, str], int] = {}
    for r, name, *_ in items:
        made[(id(r), name)] = made.get((id(r), name), 0) + 1

    def key(r: RunResult) -> tuple[str, str, bool]:
        return r.dataset, r.mechanism, r.off_point

    def count(r: RunResult, attack: str | None) -> int:
        return sum(n for (rid, name), n in made.items()
                   if rid == id(r) and (attack is None or name == attack or name.startswith(attack + "-")))

    complete = [r for r in results if r.ok and not r.attack_errors]
    extra = 0
    for r in results:
        if r.ok and not r.attack_errors:
            continue
        peers = [c for c in complete if key(c) == key(r)]
        failed = [None] if not r.ok else list(r.attack_errors)
        extra += sum(max((count(c, a) for c in peers), default=0) - count(r, a) for a in failed)
    return max(extra, 0)


def privacy_bugs(results: list[RunResult], *, confidence: float = 0.95, at_least: int = 0
                 ) -> tuple[list[PrivacyBug], list[PrivacyBug], int]:
    """Every valid bound or conformance test that refutes its model's accountant (or a source's claim).

    And the comparisons made.

    Args:
        results: the run's RunResults.
        confidence: the family-wise confidence of the whole check.
        at_least: judge as if the run made at least this many comparisons (``scripts/detection_power.py`` re-judges a
            one-cell measurement at a main job's M, so the report's detection table says what that job can catch).

    Returns:
        (privacy bugs, refuted claims, M comparisons: those made, plus those a failed cell or audit would have
        made, ``_unmade``).
    """
    items = _comparisons(results)
    total = max(len(items) + _unmade(results, items), at_least if items else 0)
    if not total:
        return [], [], 0
    corrected = 1.0 - (1.0 - confidence) / total
    found: dict[tuple[int, str], PrivacyBug] = {}  # the strongest refutation per (model, audit)
    bounds: dict[int, dict[str, float]] = {}
    for r, name, record, method, p in items:
        refuted, value = _refutes(record, method, p, corrected, bounds)
        if not refuted:
            continue
        d, claim = record.audit.design, p.epsilon is None
        stated = p.claimed_epsilon if claim else p.epsilon
        if stated is None:  # neither a guarantee nor a claim: nothing was refuted
            continue
        test = _conformance_test(record, method)
        bug = PrivacyBug(
            dataset=r.dataset, mechanism=r.mechanism, target_epsilon=r.target_epsilon, seed=r.seed, row=r.row,
            attack=name, method=CONFORMANCE if test else method,
            threat_model=d.threat_model, design=f"{d.kind}, {'m' if d.kind == 'one-run' else 'R'} = {d.size}",
            relation=p.relation if test else d.relation, lower_bound=value,
            epsilon=stated,
            delta=record.audit.delta if claim else p.delta, accountant=None if claim else p.accountant,
            confidence=corrected, **(test or NOT_CONFORMANCE))
        if test:  # the smallest p-value per (model, audit) among its rejected conformance tests
            key, old = (id(r), f"{name} {CONFORMANCE}"), found.get((id(r), f"{name} {CONFORMANCE}"))
            if old is None or (bug.p_value or 0.0) < (old.p_value or 0.0):
                found[key] = bug
            continue
        old = found.get((id(r), name))
        if old is None or old.lower_bound is None or (value is not None and value > old.lower_bound):
            found[(id(r), name)] = bug
    bugs = [b for b in found.values() if b.accountant is not None]
    claims = [b for b in found.values() if b.accountant is None]
    return bugs, claims, total
