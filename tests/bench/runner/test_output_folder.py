"""One run per output folder: another run's results are refused (or replaced with --overwrite, leaving nothing of
the old run), an interrupted run resumes, a folder in use is refused at once, files get the umask's mode and the
temporary files of a killed write are cleaned up."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from bench.cli import build_parser, main
from bench.core.errors import BenchError
from bench.core.io import atomic_write_bytes
from bench.runner.provenance import prepare_output

SMALL = ["--profile", "smoke", "--dataset", "digits", "--mechanisms", "baseline", "--attacks", "loss",
         "--no-reference-epsilons"]
REPORTS = {"report.md", "report.html", "summary.csv"}


def _argv(command: str, out: Path, cache: Path, *extra: str) -> list[str]:
    return [command, *SMALL, "--cache-dir", str(cache), "--output", str(out), *extra]


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="module")
def finished(tmp_path_factory, cache) -> Path:
    """A finished ``bench all`` of SMALL (results.json and every report), written under umask 0o022."""
    out = tmp_path_factory.mktemp("finished") / "run"
    old = os.umask(0o022)
    try:
        assert main(_argv("all", out, cache)) == 0
    finally:
        os.umask(old)
    return out


def _copy(finished: Path, tmp_path: Path) -> Path:
    out = tmp_path / "run"
    shutil.copytree(finished, out)
    return out


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def _one_line_error(capsys, code: int, *needles: str) -> str:
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1 and err.startswith("privbench: error:") and "Traceback" not in err, err
    assert all(n in err for n in needles), err
    return err


def test_another_runs_results_are_refused_before_training_and_left_untouched(finished, tmp_path, capsys):
    out, fresh_cache = _copy(finished, tmp_path), tmp_path / "fresh-cache"
    before = _files(out)
    run_id = json.loads(before["results.json"])["run_id"]
    capsys.readouterr()
    _one_line_error(capsys, main(_argv("run", out, fresh_cache, "--seeds", "1")), f"output folder {out}",
                    "another run's results", run_id, "--overwrite")
    _one_line_error(capsys, main(_argv("all", out, fresh_cache)), "complete", run_id, "--overwrite")
    assert _files(out) == before  # nothing written, nothing deleted
    assert not list(fresh_cache.rglob("*.pt"))  # refused before any training


def test_overwrite_replaces_the_results_and_leaves_nothing_of_the_old_run(finished, cache, tmp_path):
    out = _copy(finished, tmp_path)
    old = json.loads((out / "results.json").read_text())
    assert REPORTS | {"results.json"} <= set(os.listdir(out)) and list(out.glob("*.png"))
    (out / ".tmp-results.json-k2x9q1z7").write_bytes(b'{"half": ')  # a write killed midway
    (out / "notes.txt").write_text("the user's own file")
    (out / "photo.png").write_bytes(b"\x89PNG the user's own image")
    # a plug-in report section's plot, whose stem only the report that shows it knows
    with (out / "report.md").open("a", encoding="utf-8") as md:
        md.write("## Toy\n\n![Toy plot [a plug-in's alt text]](toy_plot.png)\n")
    (out / "toy_plot.png").write_bytes(b"\x89PNG drawn by a plug-in section")
    assert main(_argv("run", out, cache, "--seeds", "1", "--overwrite")) == 0
    # no report, plot or leftover of the old run
    assert sorted(os.listdir(out)) == ["notes.txt", "photo.png", "results.json"]
    doc = json.loads((out / "results.json").read_text())
    assert doc["status"] == "complete" and doc["config"]["seeds"] == [1] and doc["run_id"] != old["run_id"]


def test_an_interrupted_run_resumes_without_overwrite(finished, cache, tmp_path, capsys):
    out = _copy(finished, tmp_path)
    doc = json.loads((out / "results.json").read_text())
    (out / "results.json").write_text(json.dumps({**doc, "status": "partial", "results": [], "audit": None}))
    # the reports in the folder were drawn from that partial document: stale once the run goes on
    assert main(_argv("run", out, cache)) == 0
    resumed = json.loads((out / "results.json").read_text())
    assert resumed["status"] == "complete" and [r["timings"]["cached"] for r in resumed["results"]] == [True]
    assert sorted(os.listdir(out)) == ["results.json"]
    # an interrupted run of another configuration is another run
    (out / "results.json").write_text(json.dumps({**doc, "status": "partial", "config": {**doc["config"],
                                                                                         "seeds": [7]}}))
    capsys.readouterr()
    _one_line_error(capsys, main(_argv("run", out, cache)), "another run's results", "partial")


def _killed_while_drawing_reports(finished: Path, tmp_path: Path) -> Path:
    """A copy of ``finished`` as a kill -9 during its first report drawing leaves it: results.json complete but
    without ``report_s`` (written after the last report), a report missing, a temporary file of the one being
    written."""
    out = _copy(finished, tmp_path)
    doc = json.loads((out / "results.json").read_text())
    (out / "results.json").write_text(json.dumps({**doc, "report_s": None}))
    (out / "report.html").unlink()
    (out / ".tmp-report.md-x81kq0az").write_bytes(b"# half a rep")
    return out


def test_the_same_command_finishes_the_reports_a_kill_interrupted(finished, cache, tmp_path, capsys):
    out = _killed_while_drawing_reports(finished, tmp_path)
    before = json.loads((out / "results.json").read_text())
    capsys.readouterr()
    assert main(_argv("all", out, cache)) == 0
    assert "its reports were not finished: drawing them from results.json" in " ".join(capsys.readouterr().out.split())
    assert REPORTS <= set(os.listdir(out)) and not list(out.glob(".tmp-*"))
    doc = json.loads((out / "results.json").read_text())
    assert doc["report_s"] is not None  # its reports now drawn to the end
    assert {**doc, "report_s": None} == before  # the same run: nothing retrained, nothing else rewritten
    # finished now: the same command again is refused as before
    _one_line_error(capsys, main(_argv("all", out, cache)), "complete", "privbench report")


def test_a_refused_run_still_removes_the_leftovers_of_a_killed_write(finished, cache, tmp_path, capsys):
    out = _killed_while_drawing_reports(finished, tmp_path)
    capsys.readouterr()  # 'run' draws no reports: it names the command that does
    _one_line_error(capsys, main(_argv("run", out, cache)), "complete", f"'privbench report {out}'")
    assert not list(out.glob(".tmp-*"))


def _hold_lock(folder: Path, pid: int) -> int:
    """Lock ``folder`` as another privbench run with ``pid`` would; returns the descriptor (closing it lets go)."""
    fd = os.open(folder / ".privbench.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.write(fd, f"{pid}\n".encode())
    return fd


def test_a_folder_in_use_is_refused_at_once_and_a_stale_lock_never_blocks(finished, cache, tmp_path, capsys):
    out, busy = _copy(finished, tmp_path), tmp_path / "busy"
    busy.mkdir()
    before = _files(out)
    holders = [_hold_lock(out, 4242), _hold_lock(busy, 4343)]
    try:
        capsys.readouterr()
        for folder, pid, argv in ((busy, 4343, _argv("run", busy, cache)), (out, 4242, ["report", str(out)]),
                                  (out, 4242, _argv("run", out, cache, "--seeds", "1", "--overwrite"))):
            _one_line_error(capsys, main(argv), f"output folder {folder} is in use by another privbench run "
                            f"(pid {pid}); wait for it or choose another --output")
        assert {k: v for k, v in _files(out).items() if k != ".privbench.lock"} == before
        assert os.listdir(busy) == [".privbench.lock"]
    finally:
        for fd in holders:
            os.close(fd)  # as if killed: the kernel lets go, the file stays
    assert (out / ".privbench.lock").exists()
    assert main(["report", str(out)]) == 0
    assert not (out / ".privbench.lock").exists()


def test_files_get_the_mode_the_umask_gives(finished, tmp_path):
    written = ["results.json", *REPORTS, *(p.name for p in finished.glob("*.png"))]
    assert {n: oct(stat.S_IMODE((finished / n).stat().st_mode)) for n in written} == {n: "0o644" for n in written}
    assert not [p.name for p in finished.iterdir() if p.name.startswith(".")]  # no lock or temporary file left
    old = os.umask(0o027)
    try:
        path = atomic_write_bytes(tmp_path / "x.json", b"{}")
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o640


def test_report_removes_the_leftovers_of_a_killed_write(finished, tmp_path):
    out = _copy(finished, tmp_path)
    leftovers = [out / ".tmp-report.html-3hq8xk0a", out / ".tmp-roc_digits.png-a81kd0zz"]
    for p in leftovers:
        p.write_bytes(b"half a file")
    (out / ".keep").write_text("not privbench's")
    assert main(["report", str(out)]) == 0
    assert not any(p.exists() for p in leftovers) and (out / ".keep").exists()


def test_unrelated_files_are_allowed_but_reports_without_results_are_not(tmp_path):
    out = tmp_path / "existing"
    (out / "data").mkdir(parents=True)
    (out / "notes.txt").write_text("mine")
    with prepare_output(str(out), "rid", config={"seeds": [0]}) as folder:
        assert folder == out and (out / ".privbench.lock").exists()
    assert sorted(os.listdir(out)) == ["data", "notes.txt"]
    (out / "report.html").write_text("<html>another run</html>")
    with pytest.raises(BenchError, match=r"holds another run's reports \(report.html\) but no results.json"):
        with prepare_output(str(out), "rid", config={"seeds": [0]}):
            pass
    assert (out / "report.html").exists()
    (out / "results.json").write_text("{not json")
    with pytest.raises(BenchError, match="results.json privbench cannot read"):
        with prepare_output(str(out), "rid", config={"seeds": [0]}):
            pass
    with prepare_output(str(out), "rid", config={"seeds": [0]}, overwrite=True):
        assert sorted(os.listdir(out)) == [".privbench.lock", "data", "notes.txt", "results.json"]


@pytest.mark.parametrize("command", ["all", "run", "audit", "reproduce"])
def test_every_command_that_writes_a_folder_takes_overwrite(command):
    argv = [command, *(["dpmix"] if command == "reproduce" else [])]
    parser = build_parser()
    assert parser.parse_args(argv).overwrite is False and parser.parse_args([*argv, "--overwrite"]).overwrite is True
