"""Documents for the tests of reports/ and bench/results/ (fixtures everywhere: ``tests/conftest.py`` imports them).

``build`` holds small builders of typed ``bench.results.Results`` documents (each part as the dict results.json
holds, validated at the end by ``build.results``; ``build.checked`` also runs the run-level privacy-bug check as the
runner does, ``attacks.analysis.privacy_bugs.check``), and ``mnist_results`` a realistic one built from them: six models
with and without guarantees, heuristic membership attacks and canary audits (one-run white-box and black-box,
multi-run), one failed cell, one failed attack, a release, and hostile text in the config.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from attacks.analysis import membership_audit
from attacks.analysis.privacy_bugs.check import privacy_bugs
from attacks.analysis.statistics.metrics import membership_metrics
from bench.core.design import AuditDesign
from bench.results import SCHEMA_VERSION, Results

SCRIPT = "<script>alert(1)</script>"
HEADER = {
    "schema_version": SCHEMA_VERSION, "run_id": "test-run", "status": "complete",
    "created": "2026-11-22T05:40:00+00:00",
    "config": {}, "versions": {}, "git_hash": None, "git_dirty": None, "platform": "Linux-6.1-x86_64",
    "device": "cpu",
}  # fmt: skip


def attack(name: str, rng: np.random.Generator, n: int, shift: float, *, delta: float = 1e-5,
           design: dict[str, Any] | None = None, profile: list[list[float]] | None = None,
           audited: dict[str, Any] | None = None, dist: str = "normal") -> dict[str, Any]:
    """An ``AttackRecord`` dict as the runner makes it (``bench.runner.cells.membership_record``): ``n`` members
    (canaries in) scored ``shift`` higher than ``n`` non-members (canaries out), noise ``dist`` ("normal" or the
    skewed "exponential"); ``design`` (``AuditDesign`` fields; None: heuristic, black-box) decides which bounds are
    valid; ``profile`` the accountant's certified curve a one-run design tests; ``audited`` the audit run's privacy."""
    labels = np.r_[np.ones(n, int), np.zeros(n, int)]
    noise = rng.normal(size=2 * n) if dist == "normal" else rng.exponential(size=2 * n)
    scores = noise + shift * labels
    metrics = membership_metrics(scores, labels)
    full = AuditDesign(**{"size": 2 * n, **(design or {})})
    audit = membership_audit(scores, labels, delta=delta, design=full, profile=profile)
    record = {"attack": name, "n_members": n, "n_non_members": n, "roc": metrics.pop("roc"), "metrics": metrics,
              "audit": {**audit, "design": full.model_dump()}}
    return {**record, "audited_privacy": audited} if audited else record


def canary(name: str, rng: np.random.Generator, m: int, shift: float, *, threat_model: str = "white-box",
           kind: str = "one-run", relation: str = "add-remove", gaussian: bool = False, **kwargs: Any
           ) -> dict[str, Any]:
    """An audit's ``AttackRecord`` dict: ``m`` canaries (one-run) or runs (multi-run), half included."""
    design = {"kind": kind, "threat_model": threat_model, "size": m, "relation": relation, "gaussian": gaussian}
    return attack(name, rng, m // 2, shift, design=design, **kwargs)


def privacy(eps: float | None = None, delta: float | None = None, accountant: str = "none", guarantee: str = "none",
            *, claimed: float | None = None, note: str = "", weak: bool = False,
            relation: str | None = None, profile: list[list[float]] | None = None) -> dict[str, Any]:
    """A ``PrivacyRecord`` dict (no arguments: no guarantee)."""
    return {"epsilon": eps, "delta": delta, "accountant": accountant, "guarantee": guarantee,
            "claimed_epsilon": claimed, "note": note, "weak_delta": weak, "relation": relation,
            "profile": profile or []}  # fmt: skip


def run(mechanism: str, target: float | None, priv: dict[str, Any] | None, acc: float | None,
        attacks: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """A ``RunResult`` dict on mnist, seed 0; ``fields`` override any key (``release``, ``attack_errors``, ...)."""
    return {
        "dataset": "mnist", "mechanism": mechanism, "seed": 0, "target_epsilon": target, "model": "cnn-small",
        "spec": {"model": "cnn-small", "epochs": 3, "batch_size": 256, "lr": 0.5, "optimizer": "sgd",
                 "momentum": 0.0, "params": {}},
        "params": {}, "privacy": priv,
        "utility": None if acc is None else {"test_accuracy": acc, "test_loss": 0.3, "train_accuracy": acc},
        "attacks": attacks,
        "timings": {"train_s": 10.0, "samples_per_s": 4100.0, "eval_s": 0.4, "attack_s": 0.8, "cached": False},
        "history": [0.9, 0.5], "status": "ok", "error": None, "cache_key": "3f2a", **fields,
    }  # fmt: skip


def results(runs: list[dict[str, Any]], **fields: Any) -> Results:
    """A validated ``Results`` holding ``runs``; ``fields`` override the top-level keys of ``HEADER``."""
    return Results.model_validate({**HEADER, "results": runs, **fields})


def checked(runs: list[dict[str, Any]], **fields: Any) -> Results:
    """``results`` with the run-level check of a completed run, as the runner makes it
    (``attacks.analysis.privacy_bugs.check``): ``privacy_bugs``, ``refuted_claims`` and ``audit``."""
    doc = results(runs, **fields)
    bugs, claims, comparisons = privacy_bugs(doc.results)
    return results(runs, **fields, privacy_bugs=[b.model_dump() for b in bugs],
                   refuted_claims=[b.model_dump() for b in claims],
                   audit={"confidence": 0.95, "comparisons": comparisons})


@pytest.fixture(scope="session")
def build() -> SimpleNamespace:
    """The builders above: ``build.attack``, ``build.canary``, ``build.privacy``, ``build.run``, ``build.results``,
    ``build.checked``."""
    return SimpleNamespace(attack=attack, canary=canary, privacy=privacy, run=run, results=results,
                           checked=checked, script=SCRIPT)


@pytest.fixture(scope="session")
def mnist_results() -> Results:
    """Six mnist models: the baseline (two heuristic attacks, 10,000 each), DP-SGD at ε 1 (a heuristic attack and a
    weak white-box one-run canary audit, m = 2000, in an audit run of ε 0.98) and at 8 (lira failed), DPMix at 15
    (weak δ, replace-one, a release, a black-box one-run audit of the release, m = 256), weight noise with a merely
    claimed ε and a multi-run audit (R = 1000), and a failed local-noise cell (a pipe in its reason); ``<script>``
    in the config. The run-level check finds no privacy bug."""
    rng = np.random.default_rng(0)
    release = {"kind": "dpmix", "shape": [28, 28], "labels": [0, 1, 2, 3],
               "images": rng.integers(0, 256, size=(4, 784)).tolist()}  # fmt: skip
    dp = {"accountant": "opacus-prv", "guarantee": "central-dp", "relation": "add-remove"}
    audit_run = privacy(0.98, 1e-5, **dp, profile=[[0.98, 1e-5], [2.0, 1e-8]])
    runs = [
        run("baseline", None, privacy(note="non-private baseline"), 0.985,
            {"loss": attack("loss", rng, 10_000, 0.8), "entropy": attack("entropy", rng, 10_000, 0.3)}),
        run("dpsgd", 1.0, privacy(0.99, 1e-5, **dp), 0.90,
            {"loss": attack("loss", rng, 2_000, 0.05),  # 0.1 % of 2,000 < 10: not measurable
             "canary-whitebox": canary("canary-whitebox", rng, 2_000, 0.1, audited=audit_run,
                                       profile=audit_run["profile"])}),
        run("dpsgd", 8.0, privacy(7.93, 1e-5, **dp), 0.95, {"loss": attack("loss", rng, 2_000, 0.15)},
            attack_errors={"lira": "RuntimeError: shadow model 3 diverged (loss nan)"}),
        run("dpmix", 15.0, privacy(14.7, 1e-4, "dpmix-closed-form", "dp-release", weak=True, relation="replace-one"),
            0.68, {"loss": attack("loss", rng, 2_000, 0.02, delta=1e-4),
                   "dpmix-canary": canary("dpmix-canary", rng, 256, 0.3, threat_model="black-box",
                                          relation="replace-one", delta=1e-4)}, release=release),
        run("weight-noise", 10.0, privacy(claimed=10.0, note="noise std 0.1 on weights"), 0.76,
            {"loss": attack("loss", rng, 2_000, 0.3),
             "weight-canary": canary("weight-canary", rng, 1_000, 0.5, threat_model="black-box", kind="multi-run",
                                     gaussian=True)}),
        run("local-gaussian", 1.0, None, None, {}, status="failed",
            error="RuntimeError: CUDA out of memory | tried to allocate 2 GiB"),
    ]  # fmt: skip
    return checked(
        runs, run_id="mnist-default-20261122T0540", status="partial",
        config={"profile": "default", "dataset": "mnist", "output": SCRIPT, "n_members": 10_000,
                "training": {"baseline": {"epochs": 8}, "dpsgd": {"epochs": 8}}},
        versions={"python": "3.11.7", "torch": "2.5.0", "opacus": "1.5.2", "privbench": "0.1.0"},
        git_hash="abc123def",
        datasets={"mnist": {"n_members": 10_000, "n_non_members": 10_000, "n_test": 2_000,
                            "n_population": 10_000, "input_shape": [1, 28, 28], "num_classes": 10}},
    )  # fmt: skip
