"""A user's plug-in mechanism fails its own cell alone (issue 40, item 2): a ``fit`` that raises, returns NaN
weights, returns a model of the wrong output shape or never returns within ``--job-timeout`` gives one line naming
the plug-in and the fault; the other cells and the reports complete (exit 1), and a rerun retries only the failed
cells."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch
from torch import nn

from bench.core.data import load_dataset
from bench.core.types import PrivacySpent, TrainedModel
from bench.execution.faults import JobTimeout, MechanismFault, check_trained, time_limit

REPO = Path(__file__).resolve().parents[3]

FAULTY = '''
"""Plug-in mechanisms with one fault each; each trains the real baseline first where it needs a model."""
import time

import torch

from mechanisms import MECHANISMS
from mechanisms.baseline import Baseline


class _Faulty(Baseline):
    needs_epsilon = False
    recipes = {"smoke": {"model": "mlp", "epochs": 1, "batch_size": 64, "lr": 0.1}}


class Raises(_Faulty):
    name = "fault-raises"

    def fit(self, train, spec, **kw):
        raise RuntimeError("my loader broke\\nsecond line")


class NaNWeights(_Faulty):
    name = "fault-nan"

    def fit(self, train, spec, **kw):
        trained = super().fit(train, spec, **kw)
        with torch.no_grad():
            next(trained.model.parameters()).view(-1)[0] = float("nan")
        return trained


class WrongShape(_Faulty):
    name = "fault-shape"

    def fit(self, train, spec, **kw):
        trained = super().fit(train, spec, **kw)
        trained.model = torch.nn.Sequential(trained.model, torch.nn.Linear(train.num_classes, 3))
        return trained


class Hangs(_Faulty):
    name = "fault-hangs"

    def fit(self, train, spec, **kw):
        time.sleep(3600)


for cls in (Raises, NaNWeights, WrongShape, Hangs):
    MECHANISMS.add(cls)
'''

EXPECTED = {  # mechanism -> the one line its failed cell records (and prints)
    "fault-raises": "plug-in mechanism fault-raises (faulty_plugin): fit raised RuntimeError: my loader broke",
    "fault-nan": "plug-in mechanism fault-nan (faulty_plugin): fit returned a model with non-finite weights (NaN in ",
    "fault-shape": ("plug-in mechanism fault-shape (faulty_plugin): fit returned a model whose output is shape (2, 3) "
                    "for 2 records; expected (2, 10) (one logit per class)"),
    "fault-hangs": ("plug-in mechanism fault-hangs (faulty_plugin): fit did not return within the job time limit of "
                    "8 s (--job-timeout)"),
}


def _run(root: Path, out: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{REPO}", "COLUMNS": "400"}  # no wrapped lines
    return subprocess.run([sys.executable, "-m", "bench", "all", "--profile", "smoke", "--plugins", "faulty_plugin",
                           "--mechanisms", "baseline," + ",".join(EXPECTED), "--attacks", "loss",
                           "--no-privacy-off-points", "--job-timeout", "8s", "--output", str(out),
                           "--cache-dir", str(root / "cache")],
                          capture_output=True, text=True, timeout=900, env=env, cwd=root)


@pytest.mark.slow
def test_faulty_plugins_fail_their_cells_alone_and_a_rerun_retries_only_them(tmp_path):
    (tmp_path / "faulty_plugin.py").write_text(textwrap.dedent(FAULTY))
    out = tmp_path / "run"
    proc = _run(tmp_path, out)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    doc = json.loads((out / "results.json").read_text())
    assert doc["status"] == "complete"
    by_mech = {r["mechanism"]: r for r in doc["results"]}
    assert by_mech["baseline"]["status"] == "ok" and by_mech["baseline"]["attacks"]["loss"]
    for mech, line in EXPECTED.items():
        assert by_mech[mech]["status"] == "failed", mech
        assert by_mech[mech]["error"].startswith(line), by_mech[mech]["error"]
        assert "\n" not in by_mech[mech]["error"]
        assert f"{mech} seed 0: failed: {line}" in proc.stderr  # the run's one line for it
    report = (out / "report.md").read_text()
    for mech, line in EXPECTED.items():
        assert f"failed: {line}" in report, mech
    # nothing calls a failed model private: the verdict's sentences name none of them
    verdict = report[report.index("Verdict"):report.index("Pareto-optimal:")]
    assert all(f"{mech}:" not in verdict or "every model failed" in verdict for mech in EXPECTED)
    assert "summary.csv" in {p.name for p in out.iterdir()}

    again = _run(tmp_path, out)  # the same command: only the failed cells are retried
    assert again.returncode == 1, again.stderr[-3000:]
    assert "retrying them" in again.stderr
    redo = {r["mechanism"]: r for r in json.loads((out / "results.json").read_text())["results"]}
    assert redo["baseline"]["timings"]["cached"] is True  # finished: loaded, not trained again
    assert redo["baseline"]["utility"] == by_mech["baseline"]["utility"]
    assert all(redo[m]["status"] == "failed" for m in EXPECTED)


@pytest.fixture(scope="module")
def digits():
    pool, _ = load_dataset("digits")
    return pool.subset(torch.arange(64))


def _model(out_features: int) -> nn.Module:
    return nn.Sequential(nn.Flatten(), nn.Linear(64, out_features))


def test_a_model_with_an_infinite_buffer_or_weight_is_refused(digits):
    model = _model(10)
    with torch.no_grad():
        model[1].bias[3] = float("inf")
    with pytest.raises(MechanismFault, match=r"^mechanism baseline: fit returned a model with non-finite weights "
                                             r"\(an infinite value in 1\.bias\)$"):
        check_trained(TrainedModel(model, PrivacySpent.privacy_off()), digits, "baseline")


def test_a_model_of_the_right_shape_and_finite_weights_passes(digits):
    check_trained(TrainedModel(_model(10), PrivacySpent.privacy_off()), digits, "baseline")
    with pytest.raises(MechanismFault, match=r"output is shape \(2, 9\) for 2 records; expected \(2, 10\)"):
        check_trained(TrainedModel(_model(9), PrivacySpent.privacy_off()), digits, "baseline")
    wrong_input = nn.Sequential(nn.Flatten(), nn.Linear(63, 10))
    with pytest.raises(MechanismFault, match="fails on 2 training records"):
        check_trained(TrainedModel(wrong_input, PrivacySpent.privacy_off()), digits, "baseline")


def test_the_time_limit_interrupts_a_job_and_restores_the_alarm():
    with pytest.raises(JobTimeout, match=r"^mechanism baseline: fit did not return within the job time limit of "
                                         r"0\.3 s \(--job-timeout\)$"):
        with time_limit(0.3, "baseline"):
            time.sleep(30)
    with time_limit(5.0, "baseline"):  # a job that returns in time is left alone, and no alarm is left behind
        pass
    import signal

    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


@pytest.mark.parametrize("value,seconds", [(90, 90.0), ("90s", 90.0), ("10m", 600.0), ("6h", 21600.0)])
def test_the_job_time_limit_reads_seconds_minutes_and_hours(value, seconds):
    from bench.config.validation import job_time_limit

    assert job_time_limit(value) == seconds


@pytest.mark.parametrize("value", [0, -1, "5x", "inf", True, "1d"])
def test_a_bad_job_time_limit_is_one_line(value):
    from bench.config.validation import job_time_limit
    from bench.core.errors import ConfigError

    with pytest.raises(ConfigError, match=rf"^job_timeout = {re.escape(repr(value))} must be a time > 0: seconds "):
        job_time_limit(value)
