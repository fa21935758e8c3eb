"""The measured detection-power table.

(zoo data: ``bench/zoo/data/detection_power.json``, written by ``scripts/detection_power.py`` from runs of the zoo's
bugs.) Per profile, mechanism, target ε and injected bug, whether one run of that profile ended with exit status 3. A
run records the rows of its own profile and mechanisms in results.json (``audit.detection_power``), so that its report
states what the run could have caught. Reading it imports no torch, and no code of ``bench.zoo`` (the layers contract
keeps the harness below the zoo): the file is read by its path.
"""

from __future__ import annotations

import json
from pathlib import Path

from bench.results import DetectionRow

TABLE = Path(__file__).resolve().parents[1] / "zoo" / "data" / "detection_power.json"
"""The zoo's data file, in the source tree and in an installed package alike (package data of ``bench.zoo``)."""


def bug_text(bug: str) -> str:
    """The table's bug key in words (``"0.5"``: ``σ × 0.5``; ``"labels"``: labels in the clear; ``"1"``: none)."""
    return {"labels": "labels in the clear", "1": "none"}.get(bug, f"σ × {bug}")


def detection_rows(profile: str, mechanisms: list[str] | tuple[str, ...], *, path: Path = TABLE
                   ) -> list[DetectionRow]:
    """The measured rows of ``profile`` for ``mechanisms`` (in the table's order).

    None where the table or a row is missing, or a row's run did not end with exit status 0 or 3.

    Raises:
        ValueError: the table is not valid JSON or a row lacks a field (a broken table in the checkout).
    """
    if not path.exists():
        return []
    try:
        rows = json.loads(path.read_text(encoding="utf-8"))["rows"]
        return [DetectionRow(profile=r["profile"], mechanism=r["mechanism"], epsilon=r["epsilon"],
                             bug=bug_text(r["bug"]), caught=r.get("exit_judged", r["exit"]) == 3,
                             epsilon_lb=max(r["epsilon_lb"].values(), default=None),
                             commit=r["commit"] + ("+dirty" if r.get("dirty") else ""),
                             comparisons=r.get("judged_at"))
                for r in rows if r["profile"] == profile and r["mechanism"] in mechanisms and r["exit"] in (0, 3)]
    except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"{path}: not a detection-power table ({type(exc).__name__}: {exc})") from None
