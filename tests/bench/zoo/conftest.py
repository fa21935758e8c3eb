"""The zoo's tests in CI: with ``PRIVBENCH_REQUIRE_ANCHORS=1`` (``.ci/run`` sets it, having installed the ``zoo``
extra) a test of ``tests/bench/zoo`` that skips — an anchor's package missing, or its auditor saying "not installed" —
is a failure, so the code that makes the zoo's comparison fair never goes unexercised unnoticed."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

REQUIRE_ANCHORS = "PRIVBENCH_REQUIRE_ANCHORS"
HERE = Path(__file__).resolve().parent

# TensorFlow (which ML Privacy Meter's auditor imports) loaded before Triton's library makes Triton's import
# segfault (TensorFlow 2.21 and the triton that torch 2.14.1 ships; the other order is fine), and torch imports
# Triton lazily, e.g. the first time torch.func runs (tests/bench/zoo/test_bugs.py): in a test process that may do both,
# Triton goes first. The zoo itself never mixes them: its workers judge, its runs train, in separate processes.
if importlib.util.find_spec("tensorflow") is not None and importlib.util.find_spec("triton") is not None:
    import triton  # noqa: F401


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> object:
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if report.skipped and os.environ.get(REQUIRE_ANCHORS) == "1" and Path(str(item.path)).is_relative_to(HERE):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = (f"skipped ({reason}), but {REQUIRE_ANCHORS}=1: the anchors' packages must be installed "
                           "(pip install -e '.[zoo]'), and a zoo test may not skip")
    return None
