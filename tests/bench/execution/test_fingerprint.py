"""A change of the code or of a library that shapes a model invalidates exactly the cache entries it affects
(bench.execution.fingerprint, part of every cache key): shown on a copy of the project whose code is edited."""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import bench.execution.fingerprint as fp

ROOT = Path(__file__).resolve().parents[3]
PACKAGES = ("bench", "mechanisms", "attacks", "reports")
MECHS = ("baseline", "dpsgd", "local-gaussian", "weight-noise")
PRINT = ("import json; from bench.execution.jobs import code_fingerprint; "
         f"print(json.dumps({{m: code_fingerprint(m, 'mlp')['code'] for m in {MECHS!r}}}))")


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    """A copy of the project's packages (what a second checkout is)."""
    for pkg in PACKAGES:
        shutil.copytree(ROOT / pkg, tmp_path / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def _env(project: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(project)}


def _fingerprints(project: Path) -> dict[str, str]:
    out = subprocess.run([sys.executable, "-c", PRINT], cwd=project, env=_env(project), capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout)


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1))


def test_a_constant_changes_only_the_mechanisms_that_import_it(project):
    before = _fingerprints(project)
    _edit(project / "mechanisms/local/mechanism.py", "SENSITIVITY = 2.0", "SENSITIVITY = 1.0")
    after = _fingerprints(project)
    assert after["local-gaussian"] != before["local-gaussian"]
    assert {m: after[m] for m in MECHS if m != "local-gaussian"} == \
        {m: before[m] for m in MECHS if m != "local-gaussian"}


def test_shared_training_code_changes_every_mechanism(project):
    before = _fingerprints(project)
    _edit(project / "bench/core/training.py", "import torch\n", "import torch\n\n_EDITED = 1\n")
    after = _fingerprints(project)
    assert all(after[m] != before[m] for m in MECHS)


def test_comments_and_docstrings_keep_the_cache(project):
    before = _fingerprints(project)
    path = project / "mechanisms/local/mechanism.py"
    text = path.read_text()
    head, rest = text.split('"""', 1)
    path.write_text(head + '"""An edited docstring. ' + rest + "\n# a new comment\n")
    assert _fingerprints(project) == before


def test_a_library_version_changes_the_mechanisms_that_use_it(monkeypatch):
    modules = (("dpsgd", "dpsgd.mechanism"), ("baseline", "baseline"))
    base = {m: fp.fingerprint(f"mechanisms.{mod}") for m, mod in modules}
    real = fp.metadata.version
    monkeypatch.setattr(fp.metadata, "version", lambda d: "99.0" if d == "opacus" else real(d))
    fp._closure.cache_clear()
    try:
        new = {m: fp.fingerprint(f"mechanisms.{mod}") for m, mod in modules}
    finally:
        fp._closure.cache_clear()
    assert new["dpsgd"]["libraries"]["opacus"] == "opacus==99.0" != base["dpsgd"]["libraries"]["opacus"]
    assert "opacus" not in base["baseline"]["libraries"] and new["baseline"] == base["baseline"]


def _run(project: Path, cache: Path, out: Path) -> dict:
    config = out.parent / "public-labels.yaml"  # labels public: σ is the analytic σ at sensitivity SENSITIVITY
    config.write_text("training:\n  local-gaussian: {params: {labels: public}}\n")
    cmd = [sys.executable, "-m", "bench", "run", "--config", str(config), "--profile", "smoke", "--dataset", "digits",
           "--mechanisms", "local-gaussian", "--attacks", "loss", "--epsilons", "4", "--no-reference-epsilons",
           "--no-privacy-off-points", "--cache-dir", str(cache), "--output", str(out)]
    subprocess.run(cmd, cwd=project, env=_env(project), capture_output=True, text=True, check=True, timeout=300)
    (r,) = json.loads((out / "results.json").read_text())["results"]
    return r


@pytest.mark.slow
@pytest.mark.long  # tests/conftest.py: left out of the default run, CI runs it with `pytest -m long`
def test_edited_code_retrains_instead_of_reusing_the_old_model(project, tmp_path):
    """The issue's reproduction: a cached command rerun after ``SENSITIVITY`` changed must not bring back the
    model (and σ) of the old code."""
    cache = tmp_path / "cache"
    first = _run(project, cache, tmp_path / "a")
    again = _run(project, cache, tmp_path / "b")
    assert not first["timings"]["cached"] and again["timings"]["cached"]
    _edit(project / "mechanisms/local/mechanism.py", "SENSITIVITY = 2.0", "SENSITIVITY = 1.0")
    edited = _run(project, cache, tmp_path / "c")
    assert not edited["timings"]["cached"]
    assert edited["params"]["sigma"] == pytest.approx(first["params"]["sigma"] / 2, rel=1e-6)


def test_a_module_imported_from_a_folder_no_longer_on_the_path_does_not_enter(tmp_path, monkeypatch):
    """The fingerprint follows the code and the import path, not what this process imported earlier: a module a
    test imported from a folder since taken off ``sys.path`` is not part of it (it was, through ``sys.modules``, and
    made the zoo's keys differ between a test process and the zoo's driver)."""
    plugin, other = tmp_path / "plugin", tmp_path / "other"
    plugin.mkdir()
    other.mkdir()
    (plugin / "fp_plugin_50.py").write_text("import fp_dep_50\n\nX = 1\n")
    (other / "fp_dep_50.py").write_text("Y = 2\n")
    monkeypatch.syspath_prepend(str(plugin))
    before = fp.fingerprint("fp_plugin_50")
    monkeypatch.syspath_prepend(str(other))
    importlib.import_module("fp_dep_50")
    on_path = fp.fingerprint("fp_plugin_50")
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p != str(other)])
    assert "fp_dep_50" in sys.modules
    assert on_path["modules"] == before["modules"] + 1 and on_path["code"] != before["code"]
    assert fp.fingerprint("fp_plugin_50") == before
    monkeypatch.delitem(sys.modules, "fp_dep_50")
