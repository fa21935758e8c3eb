"""Documents for the report tests.

``build`` holds small builders of typed ``bench.results.Results`` documents (each part as the dict results.json
holds, validated at the end by ``build.results``), and ``mnist_results`` a realistic one built from them: six
models with and without guarantees, one failed cell, one failed attack, a release, and hostile text in the config.
``smoke_report`` is a real, tiny run: the session's ``bench all --profile smoke`` run (``tests/conftest.py``),
copied, with its reports redrawn by ``python -m bench report`` through the command line.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from attacks.audit import membership_audit, one_run_guesses
from attacks.metrics import membership_metrics
from bench.results import Results

SCRIPT = "<script>alert(1)</script>"
HEADER = {
    "schema_version": 2, "run_id": "test-run", "status": "complete", "created": "2026-11-22T05:40:00+00:00",
    "config": {}, "versions": {}, "git_hash": None, "git_dirty": None, "platform": "Linux-6.1-x86_64",
    "device": "cpu",
}  # fmt: skip


def attack(name: str, rng: np.random.Generator, n: int, shift: float, *, delta: float = 1e-5,
           canary: bool = False) -> dict[str, Any]:
    """An ``AttackRecord`` dict: ``n`` members scored ``shift`` higher than ``n`` non-members, with its audit."""
    labels = np.r_[np.ones(n, int), np.zeros(n, int)]
    scores = rng.normal(size=2 * n) + shift * labels
    metrics = membership_metrics(scores, labels)
    one_run = {"m": 2 * n, "guesses": one_run_guesses(scores, labels)} if canary else None
    audit = membership_audit(scores, labels, delta=delta, one_run=one_run)
    if canary:
        audit["design"] = {"kind": "one-run", "threat_model": "black-box", "size": 2 * n, "inclusion": 0.5}
    return {"attack": name, "n_members": n, "n_non_members": n, "roc": metrics.pop("roc"), "metrics": metrics,
            "audit": audit}


def privacy(eps: float | None = None, delta: float | None = None, accountant: str = "none", guarantee: str = "none",
            *, claimed: float | None = None, note: str = "", weak: bool = False,
            relation: str | None = None) -> dict[str, Any]:
    """A ``Privacy`` dict (no arguments: no guarantee)."""
    return {"epsilon": eps, "delta": delta, "accountant": accountant, "guarantee": guarantee,
            "claimed_epsilon": claimed, "note": note, "weak_delta": weak, "relation": relation}  # fmt: skip


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


@pytest.fixture(scope="session")
def build() -> SimpleNamespace:
    """The builders above: ``build.attack``, ``build.privacy``, ``build.run``, ``build.results``."""
    return SimpleNamespace(attack=attack, privacy=privacy, run=run, results=results, script=SCRIPT)


@pytest.fixture(scope="session")
def mnist_results() -> Results:
    """Six mnist models: the baseline (two attacks, 10,000 each), DP-SGD at ε 1 and 8 (add/remove; lira failed on
    the second), DPMix at 15 (weak δ, replace-one, a release), weight noise with a merely claimed ε, and a failed
    local-noise cell (a pipe in its reason); ``<script>`` in the config."""
    rng = np.random.default_rng(0)
    release = {"kind": "dpmix", "shape": [28, 28], "labels": [0, 1, 2, 3],
               "images": rng.integers(0, 256, size=(4, 784)).tolist()}  # fmt: skip
    dp = {"accountant": "opacus-prv", "guarantee": "central-dp", "relation": "add-remove"}
    runs = [
        run("baseline", None, privacy(note="non-private baseline"), 0.985,
            {"loss": attack("loss", rng, 10_000, 0.8), "entropy": attack("entropy", rng, 10_000, 0.3)}),
        run("dpsgd", 1.0, privacy(0.99, 1e-5, **dp), 0.90,
            {"loss": attack("loss", rng, 2_000, 0.05)}),  # 0.1 % of 2,000 < 10: not measurable
        run("dpsgd", 8.0, privacy(7.93, 1e-5, **dp), 0.95, {"loss": attack("loss", rng, 2_000, 0.15)},
            attack_errors={"lira": "RuntimeError: shadow model 3 diverged (loss nan)"}),
        run("dpmix", 15.0, privacy(14.7, 1e-4, "dpmix-closed-form", "dp-release", weak=True, relation="replace-one"),
            0.68, {"loss": attack("loss", rng, 2_000, 0.02, delta=1e-4)}, release=release),
        run("weight-noise", 10.0, privacy(claimed=10.0, note="noise std 0.1 on weights"), 0.76,
            {"loss": attack("loss", rng, 2_000, 0.3)}),
        run("local-gaussian", 1.0, None, None, {}, status="failed",
            error="RuntimeError: CUDA out of memory | tried to allocate 2 GiB"),
    ]  # fmt: skip
    return results(
        runs, run_id="mnist-default-20261122T0540", status="partial",
        config={"profile": "default", "dataset": "mnist", "output": SCRIPT, "n_members": 10_000,
                "training": {"baseline": {"epochs": 8}, "dpsgd": {"epochs": 8}}},
        versions={"python": "3.11.7", "torch": "2.5.0", "opacus": "1.5.2", "privbench": "0.1.0"},
        git_hash="abc123def",
        datasets={"mnist": {"n_members": 10_000, "n_non_members": 10_000, "n_test": 2_000,
                            "n_population": 10_000, "input_shape": [1, 28, 28], "num_classes": 10}},
    )  # fmt: skip


@pytest.fixture(scope="session")
def smoke_report(smoke_run, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the smoke run's folder whose reports were redrawn by ``python -m bench report``. Holds
    results.json, report.html, report.md, summary.csv and the PNGs."""
    out = tmp_path_factory.mktemp("smoke-report") / "run"
    shutil.copytree(smoke_run[0], out)
    for stale in [*out.glob("*.png"), *out.glob("report.*"), out / "summary.csv"]:
        stale.unlink()  # so every file the tests read was drawn by `bench report`
    proc = subprocess.run([sys.executable, "-m", "bench", "report", str(out)], capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out
