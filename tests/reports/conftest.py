"""A real, tiny run for the report tests: the session's ``bench all --profile smoke`` run (``tests/conftest.py``),
copied, with its reports redrawn by ``python -m bench report`` through the command line."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def smoke_report(smoke_run, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the smoke run's folder whose reports were redrawn by ``python -m bench report``. Holds
    results.json, report.html, report.md, summary.csv and the PNGs."""
    run = tmp_path_factory.mktemp("smoke-report") / "run"
    shutil.copytree(smoke_run[0], run)
    for stale in [*run.glob("*.png"), *run.glob("report.*"), run / "summary.csv"]:
        stale.unlink()  # so every file the tests read was drawn by `bench report`
    proc = subprocess.run([sys.executable, "-m", "bench", "report", str(run)], capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return run
