"""The report tests' real, tiny run: ``smoke_report``, the session's ``bench all --profile smoke`` run
(``tests/conftest.py``), copied, with its reports redrawn by ``python -m bench report`` through the command line. The
typed documents they build (``build``, ``mnist_results``) are in ``tests/documents.py``."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import shared_once


@pytest.fixture(scope="session")
def smoke_report(smoke_run, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the smoke run's folder whose reports were redrawn by ``python -m bench report``, once per test run
    (``helpers.shared_once``). Holds results.json, report.html, report.md, summary.csv and the PNGs."""

    def build(folder: Path) -> None:
        out = folder / "run"
        shutil.copytree(smoke_run[0], out)
        for stale in [*out.glob("*.png"), *out.glob("report.*"), out / "summary.csv"]:
            stale.unlink()  # so every file the tests read was drawn by `bench report`
        proc = subprocess.run([sys.executable, "-m", "bench", "report", str(out)], capture_output=True, text=True,
                              timeout=900)
        assert proc.returncode == 0, proc.stderr[-3000:]

    return shared_once(tmp_path_factory, "smoke-report", build) / "run"
