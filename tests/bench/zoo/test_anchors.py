"""The anchors' auditors (``bench/zoo/auditors/jax_privacy.py``, ``art.py``, ``mlpm.py``) on synthetic canary scores:
m canaries, each included with probability ½, scored N(0, 1) when excluded and N(μ, 1) when included. A correct
mechanism certified ε = 2 (add/remove, δ = 1e-5) is μ-GDP with μ = μ(ε = 2, δ) at most, so its canaries shift by μ;
a broken one (half the noise, no clipping) shifts them far more. Each installed anchor's verdict is caught on the
broken mechanism and not on the correct one; an anchor whose package is missing is skipped (and its row says "not
installed", which ``missing`` reports)."""

from __future__ import annotations

import importlib.util
from types import SimpleNamespace

import numpy as np
import pytest
from scipy.optimize import brentq

from attacks.analysis import membership_audit
from attacks.analysis.statistics.fdp import gdp_epsilon
from attacks.analysis.statistics.metrics import membership_metrics
from bench.core.design import AuditDesign
from bench.results.membership import AttackRecord
from bench.results.privacy import PrivacyRecord
from bench.zoo.api import AUDITORS, AuditorInput
from bench.zoo.auditors._anchors import AnchorAuditor, canaries
from bench.zoo.catalogue import load

DELTA = 1e-5
M = 2000
MU_CORRECT = brentq(lambda mu: gdp_epsilon(mu, DELTA) - 2.0, 0.01, 5.0)  # ≈ 0.5: exactly ε = 2 at δ = 1e-5
MU_BROKEN = 8.0  # ε(8-GDP, 1e-5) ≈ 40: a clipping bound ignored, the noise far below the certified
PACKAGES = {"jax-privacy-one-run-white-box": "jax_privacy", "jax-privacy-one-run-black-box": "jax_privacy",
            "jax-privacy-one-run-fdp-white-box": "jax_privacy", "jax-privacy-one-run-fdp-black-box": "jax_privacy",
            "art-blackbox": "art", "mlpm-loss": "privacy_meter"}


def _record(name: str, threat_model: str, mu: float, rng: np.random.Generator) -> tuple[AttackRecord, tuple]:
    """An audit's record as the runner makes it, and its saved (scores, labels)."""
    labels = (rng.random(M) < 0.5).astype(np.int64)
    scores = rng.normal(size=M) + mu * labels
    design = AuditDesign("one-run", threat_model, size=M, relation="add-remove")
    metrics = membership_metrics(scores, labels)
    roc = metrics.pop("roc")
    audit = membership_audit(scores, labels, delta=DELTA, design=design)
    record = AttackRecord.model_validate({
        "attack": name, "n_members": int(labels.sum()), "n_non_members": int(M - labels.sum()), "metrics": metrics,
        "roc": roc, "audit": {**audit, "design": design.model_dump()}})
    return record, (scores, labels)


def _privacy(add_remove: bool = True) -> PrivacyRecord:
    """DP-SGD's certificate: replace-one ε = 3.5 beside add/remove ε = 2 (or without the add/remove one)."""
    other = [{"relation": "add-remove", "epsilon": 2.0, "accountant": "test-prv"}] if add_remove else []
    return PrivacyRecord(epsilon=3.5, delta=DELTA, accountant="test-prv", guarantee="central-dp",
                         relation="replace-one", other_relations=other)


def _run(mu: float, seed: int) -> AuditorInput:
    """One zoo run's input: white-box and black-box canary audits at shift ``mu``."""
    rng = np.random.default_rng(seed)
    attacks, scores = {}, {}
    for name, threat in (("canary-whitebox", "white-box"), ("canary", "black-box")):
        attacks[name], scores[name] = _record(name, threat, mu, rng)
    target = SimpleNamespace(attacks=attacks, privacy=_privacy(), seed=seed)
    return AuditorInput(results=None, target=target, scores=scores)


@pytest.fixture(scope="module")
def runs() -> dict[str, AuditorInput]:
    return {"correct": _run(MU_CORRECT, 1), "broken": _run(MU_BROKEN, 2)}


@pytest.mark.parametrize("name", sorted(PACKAGES))
def test_anchor_catches_the_broken_mechanism_and_passes_the_correct(name: str, runs: dict[str, AuditorInput]):
    pytest.importorskip(PACKAGES[name])
    load()
    auditor = AUDITORS.get(name)
    if auditor.missing():  # privacy-meter without the TensorFlow it imports
        pytest.skip(auditor.missing())
    correct, broken = auditor.judge(runs["correct"]), auditor.judge(runs["broken"])
    assert not correct.caught and correct.value is not None and 0.0 <= correct.value <= 2.0, correct.text
    assert broken.caught and broken.value is not None and broken.value > 2.0, broken.text
    assert "certified ε = 2 (add-remove" in broken.text  # held to the add/remove ε, not replace-one's 3.5


def test_no_verdict_without_a_certified_epsilon_under_the_canaries_relation(runs: dict[str, AuditorInput]):
    """Every anchor's verdict goes through ``Canaries.verdict``: a run that states no add/remove ε gets none."""
    broken = runs["broken"]
    target = SimpleNamespace(attacks=broken.target.attacks, privacy=_privacy(add_remove=False), seed=2)
    c = canaries(AuditorInput(results=None, target=target, scores=broken.scores), ("canary",))
    assert c.epsilon is None and c.relation == "add-remove"
    verdict = c.verdict(6.0, "an anchor's ε_lb")
    assert not verdict.caught and verdict.value == 6.0
    assert "no verdict" in verdict.text and "add-remove" in verdict.text
    held = canaries(broken, ("canary",)).verdict(2.0, "ε_lb")
    assert not held.caught and "≤ certified ε = 2" in held.text  # caught only strictly above the certified ε


def test_canaries_reads_the_preferred_record_and_the_certified_epsilon(runs: dict[str, AuditorInput]):
    c = canaries(runs["correct"], ("missing", "canary"))
    assert c.record == "canary" and c.epsilon == 2.0 and c.delta == DELTA and c.relation == "add-remove"
    assert c.scores.shape == c.labels.shape == (M,)
    calibration, audit = c.halves()
    assert not (calibration & audit).any() and (calibration | audit).all() and calibration.sum() == M // 2
    again, _ = c.halves()
    assert (again == calibration).all()  # fixed by the run's seed
    with pytest.raises(LookupError, match="none of"):
        canaries(runs["correct"], ("dpmix-canary", "local-canary"))


def test_missing_names_the_first_package_not_installed():
    def never(inp: AuditorInput):  # pragma: no cover - never judged
        raise AssertionError

    base = dict(name="x", threat_model="black-box", source="t", mechanisms=("dpsgd",), attacks=("canary",),
                judge=never)
    assert AnchorAuditor(**base, requires="numpy", also_requires=("scipy",)).missing() is None
    assert AnchorAuditor(**base, requires="numpy", also_requires=("no_such_pkg_39",)).missing() == (
        "no_such_pkg_39 is not installed")


def test_every_anchor_has_a_row_installed_or_not():
    load()
    for name, package in PACKAGES.items():
        auditor = AUDITORS.get(name)
        installed = importlib.util.find_spec(package) is not None
        assert (auditor.missing() is None) == (installed and all(
            importlib.util.find_spec(p) is not None for p in getattr(auditor, "also_requires", ())))
        assert auditor.description and auditor.attacks and set(auditor.mechanisms) <= {
            "dpsgd", "opacus-example", "dpmix", "local-gaussian"}
