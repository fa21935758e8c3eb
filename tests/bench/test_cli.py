"""Bad input: one line naming the value, exit status 2, no traceback, no output folder created."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bench.cli import main

YAML_CASES = {
    "malformed": ("epsilons: [1, 3\n", "malformed YAML"),
    "unknown key": ("epsilon: 1\n", "'epsilon'"),
    "not a mapping": ("- 1\n- 2\n", "mapping"),
    "wrong type": ("n_members: many\n", "n_members"),
    "negative batch": ("training:\n  dpsgd:\n    batch_size: -5\n", "batch_size = -5"),
    "float epochs": ("training:\n  baseline:\n    epochs: 2.5\n", "epochs = 2.5"),
    "mixture degree > n": ("n_members: 100\ntraining:\n  dpmix:\n    params: {mixture_degree: 101}\n",
                           "mixture_degree = 101"),
    "unknown accountant": ("training:\n  dpsgd:\n    params: {accountant: moments}\n", "'moments'"),
    "unknown param": ("training:\n  dpsgd:\n    params: {clip: 1.0}\n", "'clip'"),
    "unknown training mechanism": ("training:\n  dpsgdd: {epochs: 1}\n", "dpsgdd"),
    "unknown model": ("training:\n  baseline: {model: vgg99}\n", "vgg99"),
    "bad optimizer": ("training:\n  baseline: {optimizer: lbfgs}\n", "lbfgs"),
    "zero lr": ("training:\n  baseline: {lr: 0}\n", "lr = 0"),
    "delta as string": ("delta: small\n", "delta"),
    "bool epsilons": ("epsilons: [true]\n", "epsilons[0]"),
    "non-bool no_cache": ("no_cache: maybe\n", "no_cache"),
    "empty mechanisms": ("mechanisms: []\n", "mechanisms"),
    "negative n_test": ("n_test: -3\n", "n_test = -3"),
    # counts are never silently clipped to the data, and compute is bounded
    "more canaries than population": ("attack_params:\n  canary: {num_canaries: 401}\n",
                                      "canary.num_canaries = 401 exceeds n_population (400)"),
    "more z-samples than population": ("attacks: [rmia]\nattack_params:\n  rmia: {num_z: 1000000000}\n",
                                       "rmia.num_z = 1000000000 exceeds n_population"),
    "shadow larger than population": ("attacks: [rmia]\nattack_params:\n  rmia: {shadow_size: 401}\n",
                                      "rmia.shadow_size = 401 exceeds n_population"),
    "multi-run members beyond members": ("attacks: [multi-run]\nattack_params:\n  multi-run: {members: 501}\n",
                                         "multi-run.members = 501 exceeds n_members (500)"),
    "unbounded weight draws": ("attack_params:\n  weight-canary: {draws: 1000000000}\n", "draws = 1000000000"),
    "unbounded release canaries": ("attack_params:\n  local-canary: {num_canaries: 1000000000}\n",
                                   "local-canary.num_canaries = 1000000000"),
    "unbounded dpmix releases": ("attack_params:\n  dpmix-canary: {releases: 1000000000}\n", "releases"),
    "string count": ("attack_params:\n  canary: {num_canaries: \"100\"}\n", "num_canaries = '100'"),
    "infinite clipping norm": ("training:\n  dpsgd: {params: {max_grad_norm: .inf}}\n", "max_grad_norm = inf"),
    "tune_recipes as text": ("tune_recipes: yes please\n", "tune_recipes = 'yes please' must be true or false"),
    "tune_budget in hours": ("tune_recipes: true\ntune_budget: 2h\n", "tune_budget = '2h' must be a time > 0"),
    "unknown model_kwargs key": ("training:\n  baseline: {params: {model_kwargs: {depth: 3}}}\n", "depth"),
}

FLAG_CASES = {
    "unknown mechanism": (["--mechanisms", "dpsgd,fancy"], "'fancy'"),
    "duplicate mechanism": (["--mechanisms", "dpsgd,dpsgd"], "twice"),
    "empty mechanisms": (["--mechanisms", ","], "mechanisms"),
    "epsilon zero": (["--epsilons", "1,0"], "epsilon 0.0"),
    "epsilon negative": (["--epsilons", "-1"], "epsilon -1.0"),
    "epsilon inf": (["--epsilons", "inf"], "epsilon inf"),
    "epsilon not a number": (["--epsilons", "abc"], "'abc'"),
    "delta one": (["--delta", "1"], "delta = 1.0"),
    "delta zero": (["--delta", "0"], "delta = 0.0"),
    "delta text": (["--delta", "x"], "'x'"),
    "unknown profile": (["--profile", "huge"], "'huge'"),
    "unknown dataset": (["--dataset", "cifar"], "'cifar'"),
    "unknown device": (["--device", "tpu"], "'tpu'"),
    "negative seed": (["--seeds", "-1"], "seeds"),
    "seed beyond 64 bits": (["--seeds", "99999999999999999999999"], "[99999999999999999999999] must be integers"),
    "seed 2^64": (["--seeds", "18446744073709551616"], "must be integers in [0, 2^63 - 1]"),
    "fractional seed": (["--seeds", "1.5"], "seeds[0] = '1.5' is not an integer"),
    "repeated seed": (["--seeds", "0,0"], "lists a seed twice"),
    "zero threads": (["--threads", "0"], "threads = 0 must be an integer >= 1"),
    "fractional threads": (["--threads", "1.5"], "'1.5' is not an integer"),
    "repeated epsilon": (["--epsilons", "1,1"], "lists a value twice"),
    "unknown attack": (["--attacks", "telepathy"], "'telepathy'"),
    "missing config file": (["--config", "/nonexistent/cfg.yaml"], "/nonexistent/cfg.yaml"),
    "model does not fit data": (["--profile", "default", "--dataset", "digits"], "cnn-small"),
    "unknown flag": (["--epsilon", "1"], "--epsilon"),
    "tune budget zero": (["--tune-recipes", "--tune-budget", "0"], "tune_budget = '0' must be a time > 0"),
    "tune budget negative": (["--tune-recipes", "--tune-budget=-5m"], "tune_budget = '-5m' must be a time > 0"),
    "tune budget text": (["--tune-recipes", "--tune-budget", "soon"], "tune_budget = 'soon' must be a time > 0"),
    "tune recipes with a value": (["--tune-recipes=yes"], "--tune-recipes"),
}


def _expect_usage_error(capsys, argv: list[str], needle: str, out: Path) -> None:
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("privbench: error:")
    assert needle in lines[0]
    assert "Traceback" not in err
    assert not out.exists()


@pytest.mark.parametrize("case", sorted(YAML_CASES))
def test_bad_yaml_is_one_line_error(case, tmp_path, capsys):
    text, needle = YAML_CASES[case]
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(text)
    out = tmp_path / "out"
    _expect_usage_error(capsys, ["all", "--profile", "smoke", "--config", str(cfg), "--output", str(out)],
                        needle, out)


@pytest.mark.parametrize("case", sorted(FLAG_CASES))
def test_bad_flag_is_one_line_error(case, tmp_path, capsys):
    flags, needle = FLAG_CASES[case]
    out = tmp_path / "out"
    argv = ["all", *(["--profile", "smoke"] if "--profile" not in flags else []), *flags, "--output", str(out)]
    _expect_usage_error(capsys, argv, needle, out)


def test_missing_data_root(tmp_path, capsys):
    out = tmp_path / "out"
    empty = tmp_path / "empty"
    empty.mkdir()
    _expect_usage_error(capsys, ["all", "--profile", "smoke", "--dataset", "mnist", "--data-root", str(empty),
                                 "--output", str(out)], "--data-root", out)


def test_unwritable_output(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    out = blocker / "out"
    _expect_usage_error(capsys, ["all", "--profile", "smoke", "--output", str(out)], "not writable", out)


def test_report_of_missing_folder(tmp_path, capsys):
    _expect_usage_error(capsys, ["report", str(tmp_path / "nothing")], "results.json", tmp_path / "nothing")


def test_real_process_prints_no_traceback(tmp_path):
    """The installed entry point, as a user runs it."""
    proc = subprocess.run([sys.executable, "-m", "bench", "all", "--epsilons", "-2", "--output",
                           str(tmp_path / "o")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()]
    assert "epsilon -2.0" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "o").exists()


def test_list_names_every_plugin(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for name in ("baseline", "dpsgd", "dpmix", "local-gaussian", "weight-noise", "loss", "cnn-small", "digits"):
        assert name in out
