"""Every bad input to ``privbench zoo list | run | report`` is refused up front (issue 49): one line
``privbench: error: …`` on stderr, exit status 2, no traceback, and nothing written (the folder tree the command
was pointed at is byte for byte what it was). In-process (``bench.cli.main``), so each case costs milliseconds; one
case runs as a real subprocess to show there is no traceback either."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from bench.cli import main
from bench.zoo.document import write_document

REPO = Path(__file__).resolve().parents[3]
ROW = {"case": "dpsgd-half-noise", "bug": "dpsgd-half-noise", "mechanism": "dpsgd", "seed": 0,
       "auditor": "privbench-whitebox", "attacks": ["canary"], "certified_epsilon": 2.0, "true_epsilon": 4.3,
       "exit": 3, "run_cpu_s": 12.0, "folder": "runs/dpsgd-half-noise/seed-0", "caught": True, "value": 3.1,
       "text": "refuted", "judge_cpu_s": 0.1}


def _zoo(folder: Path, profile: str = "ci") -> dict:
    """A real zoo.json in ``folder`` (``write_document`` on one row), as ``zoo run`` writes it."""
    from bench.zoo.catalogue import load

    load()
    options = SimpleNamespace(output=folder, profile=profile, seeds=1, executor="local", plugins=(),
                              target_epsilon=2.0 if profile == "ci" else 1.0)
    return write_document(options, [ROW])


def _tree(root: Path) -> dict[str, tuple[int, int] | None]:
    """Every path under ``root`` with (size, mtime in ns) for files: what 'nothing written' compares."""
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) if p.is_file() else None
            for p in sorted(root.rglob("*"))}


def _refused(capsys, tmp_path: Path, *argv: str, match: str) -> str:
    before = _tree(tmp_path)
    code = main(list(argv))
    err = capsys.readouterr().err
    assert code == 2, (code, err)
    assert err.startswith("privbench: error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    assert match in err, err
    assert _tree(tmp_path) == before  # nothing written, nothing deleted
    return err


@pytest.fixture
def damaged(tmp_path: Path) -> Path:
    folder = tmp_path / "damaged"
    folder.mkdir()
    (folder / "zoo.json").write_text('{"schema": 2, "rows": [', encoding="utf-8")
    return folder


BAD_RUN = [
    (["--bugs", "no-such-bug"], "unknown no-such-bug"),
    (["--bugs", ""], "empty list"),
    (["--bugs", "dpsgd-no-noise,dpsgd-no-noise"], "given twice"),
    (["--auditors", "no-such-auditor"], "unknown no-such-auditor"),
    (["--seeds", "0"], "--seeds 0; allowed: 1 to 1000"),
    (["--seeds", "1001"], "--seeds 1001"),
    (["--seeds", "two"], "invalid int value"),
    (["--jobs", "0"], "--jobs 0; allowed: 1 to 64"),
    (["--jobs", "65"], "--jobs 65"),
    (["--epsilon", "0"], "--epsilon 0.0; allowed: (0, 1e+06]"),
    (["--epsilon", "-1"], "--epsilon -1.0"),
    (["--epsilon", "inf"], "--epsilon inf"),
    (["--epsilon", "nan"], "--epsilon nan"),
    (["--profile", "full"], "--profile 'full'; allowed: ci, default"),
    (["--executor", "dask"], "--executor 'dask'; allowed: local, ray"),
    (["--ray-address", "127.0.0.1:1"], "needs --executor ray"),
    (["--plugins", "no_such_module_49"], "cannot import 'no_such_module_49'"),
    (["--bugs", "dpmix-half-noise", "--auditors", "privbench-whitebox"], "none of them audits"),
    (["--profile", "default", "--data-root", "{tmp}"], "holds no MNIST/raw"),
    (["--data-root", "{tmp}/nowhere"], "is not a folder"),
]


@pytest.mark.parametrize(("args", "match"), BAD_RUN, ids=[" ".join(a) or "empty" for a, _ in BAD_RUN])
def test_a_bad_zoo_run_flag_is_one_line(capsys, tmp_path, args, match):
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    _refused(capsys, tmp_path, "zoo", "run", *args, "--output", str(tmp_path / "z"), match=match)


def test_output_paths_that_cannot_hold_a_zoo_are_refused(capsys, tmp_path):
    (tmp_path / "file").write_text("x", encoding="utf-8")
    run = ("zoo", "run", "--bugs", "dpsgd-no-noise", "--output")
    _refused(capsys, tmp_path, *run, str(tmp_path / "file"), match="is a file, not a folder")
    _refused(capsys, tmp_path, *run, str(tmp_path / "file" / "z"), match="is a file, so no folder can be made")
    (tmp_path / "holds-dir" / "zoo.json").mkdir(parents=True)
    _refused(capsys, tmp_path, *run, str(tmp_path / "holds-dir"), match="its zoo.json is a folder")
    (tmp_path / "runs-file").mkdir()
    (tmp_path / "runs-file" / "runs").write_text("", encoding="utf-8")
    _refused(capsys, tmp_path, *run, str(tmp_path / "runs-file"), match="its runs is a file")


def test_a_damaged_or_foreign_zoo_json_in_the_output_is_refused(capsys, tmp_path, damaged):
    run = ("zoo", "run", "--bugs", "dpsgd-no-noise", "--output")
    _refused(capsys, tmp_path, *run, str(damaged), match="cannot be read (not valid JSON")
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "zoo.json").write_text(json.dumps({"schema_version": 3, "results": []}), encoding="utf-8")
    _refused(capsys, tmp_path, *run, str(foreign), match="is not a zoo document (no schema and summary)")


def test_a_zoo_of_another_configuration_is_refused_without_overwrite(capsys, tmp_path):
    other = tmp_path / "other"
    _zoo(other, profile="default")  # profile default, ε 1: a rerun at ci (ε 2) into it would mix them
    err = _refused(capsys, tmp_path, "zoo", "run", "--bugs", "dpsgd-no-noise", "--output", str(other),
                   match="holds the zoo of another configuration (profile default, target ε 1.0")
    assert "--overwrite" in err
    _refused(capsys, tmp_path, "zoo", "run", "--bugs", "dpsgd-no-noise", "--epsilon", "3", "--output",
             str(tmp_path / "other"), match="another configuration")


BAD_DOCUMENTS = [
    ("[]", "is not a zoo document (no schema and summary)"),
    ('{"schema": 2, "summary": []}', "is not a zoo document privbench can read (profile: Field required"),
    ("NaN", "is not a zoo document"),
]


@pytest.mark.parametrize(("text", "match"), BAD_DOCUMENTS, ids=["array", "fields-missing", "nan"])
def test_zoo_report_refuses_a_foreign_document(capsys, tmp_path, text, match):
    (tmp_path / "zoo.json").write_text(text, encoding="utf-8")
    _refused(capsys, tmp_path, "zoo", "report", str(tmp_path), match=match)


@pytest.mark.parametrize(("where", "value", "match"), [
    (("schema",), 99, "schema: Input should be 1 or 2"),
    (("summary", 0, "verdicts"), -1, "summary.0.verdicts: Input should be greater than or equal to 0"),
    (("summary", 0, "caught"), 5, "caught 5 of 1 verdicts"),
    (("summary", 0, "auditor"), "ghost", "auditor 'ghost', which the document does not describe"),
    (("bugs", "dpsgd-half-noise", "documented"), "maybe", "bugs.dpsgd-half-noise.documented"),
])
def test_zoo_report_refuses_a_zoo_json_that_does_not_hold_together(capsys, tmp_path, where, value, match):
    _zoo(tmp_path)
    doc = json.loads((tmp_path / "zoo.json").read_text(encoding="utf-8"))
    node = doc
    for key in where[:-1]:
        node = node[key]
    node[where[-1]] = value
    (tmp_path / "zoo.json").write_text(json.dumps(doc), encoding="utf-8")
    _refused(capsys, tmp_path, "zoo", "report", str(tmp_path), match=match)


def test_zoo_report_refuses_missing_folders_and_report_paths_it_cannot_write(capsys, tmp_path, damaged):
    _refused(capsys, tmp_path, "zoo", "report", str(tmp_path / "nowhere"), match="is not there")
    (tmp_path / "file").write_text("x", encoding="utf-8")
    _refused(capsys, tmp_path, "zoo", "report", str(tmp_path / "file"), match="is a file")
    (tmp_path / "empty").mkdir()
    _refused(capsys, tmp_path, "zoo", "report", str(tmp_path / "empty"), match="no zoo.json there")
    _refused(capsys, tmp_path, "zoo", "report", str(damaged), match="cannot be read (not valid JSON")
    good = tmp_path / "good"
    _zoo(good)
    (good / "zoo.md").mkdir()
    _refused(capsys, tmp_path, "zoo", "report", str(good), match="zoo.md is a folder")


def test_zoo_report_draws_a_good_document(capsys, tmp_path):
    _zoo(tmp_path)
    assert main(["zoo", "report", str(tmp_path)]) == 0
    md = (tmp_path / "zoo.md").read_text(encoding="utf-8")
    assert "| dpsgd-half-noise | dpsgd | 2.15× | 1/1 (" in md  # true ε 4.3 over certified 2.0; caught in 1 of 1
    assert (tmp_path / "zoo_cost.png").stat().st_size > 1000


def test_a_plugin_that_fails_at_import_is_one_line(capsys, tmp_path, monkeypatch):
    (tmp_path / "broken_zoo_plugin_49.py").write_text(
        "from bench.zoo.api import register_bug\nfrom tests.bench.zoo.plugin_bug import BUG\nregister_bug(BUG)\n",
        encoding="utf-8")  # registers test-stale-sigma a second time
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.syspath_prepend(str(REPO))
    for command in (("zoo", "list"), ("zoo", "run", "--output", str(tmp_path / "z"))):
        _refused(capsys, tmp_path, *command, "--plugins", "tests.bench.zoo.plugin_bug,broken_zoo_plugin_49",
                 match="importing failed (ValueError")


def test_a_damaged_zoo_json_is_one_line_without_a_traceback(tmp_path, damaged):
    """The issue's case, as a user meets it: ``zoo report`` on a damaged zoo.json, in a process of its own."""
    done = subprocess.run([sys.executable, "-m", "bench", "zoo", "report", str(damaged)], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stdout == "", (done.stdout, done.stderr)
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("privbench: error: ")
    assert "Traceback" not in done.stderr and not (damaged / "zoo.md").exists()
