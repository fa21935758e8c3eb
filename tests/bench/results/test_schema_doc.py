"""docs/results-schema.md is generated from the typed contract (``python -m bench.results``) and kept in step; the
contract reads only its own schema version."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.results import SCHEMA_VERSION, Results, read, schema_markdown, write

REPO = Path(__file__).resolve().parents[3]
DOC = REPO / "docs" / "results-schema.md"


def test_checked_in_schema_doc_matches_the_models():
    assert DOC.read_text(encoding="utf-8") == schema_markdown(), (
        "docs/results-schema.md is stale: regenerate it with `python -m bench.results`")


def test_schema_doc_covers_every_model_and_field():
    text = schema_markdown()
    assert text.startswith(f"# results.json (schema_version {SCHEMA_VERSION})\n")
    for name in ("Results", "RunResult", "PrivacyRecord", "RelationEpsilon", "AttackRecord", "Audit", "AuditDesign",
                 "Images", "ReproductionRow"):
        assert f"\n## `{name}`\n" in text
    assert "| `relation` | str \\| None | `null` | The neighbouring relation of `epsilon`" in text
    assert "| `attack_errors` | dict[str, str] | `{}` |" in text
    assert "| `miface` | `attack_accuracy` (fraction of reconstructions" in text  # the hand-written metric keys
    assert "Atomic writes" in text


def test_python_m_bench_results_writes_the_doc(tmp_path):
    """The module's entry point regenerates the doc (run on a copy of the module, so the checkout is untouched)."""
    code = ("import runpy, sys, pathlib; import bench.core.io as io; "
            f"io.atomic_write_text = lambda p, t: pathlib.Path({str(tmp_path / 'out.md')!r}).write_text(t); "
            "runpy.run_module('bench.results', run_name='__main__', alter_sys=True)")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out.md").read_text() == schema_markdown()


def _doc(build) -> Results:
    return build.results([build.run("baseline", None, build.privacy(), 0.9, {})])


def test_read_round_trips_and_rejects_other_versions_in_one_line(build, tmp_path):
    doc = _doc(build)
    path = write(doc, tmp_path / "results.json")
    assert read(path) == doc
    other = tmp_path / "v1.json"
    other.write_text(json.dumps({**json.loads(path.read_text()), "schema_version": 1}))
    with pytest.raises(ValueError, match=r"schema_version 1 is not supported") as info:
        read(other)
    assert "\n" not in str(info.value)
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON") as info:
        read(broken)
    assert "\n" not in str(info.value)
