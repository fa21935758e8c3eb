"""A real, tiny run for the report tests: ``bench run --profile smoke`` (sklearn's bundled digits: real data,
every mechanism, every attack) and ``bench report`` on its folder, both through the command line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def smoke_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The run folder of a smoke run whose reports were redrawn by ``python -m bench report`` (about a minute
    on two cores). Holds results.json, report.html, report.md, summary.csv and the PNGs."""
    root = tmp_path_factory.mktemp("smoke-report")
    run = root / "run"
    for args in (["run", "--profile", "smoke", "--output", str(run), "--cache-dir", str(root / "cache")],
                 ["report", str(run)]):
        proc = subprocess.run([sys.executable, "-m", "bench", *args], capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, proc.stderr[-3000:]
    return run
